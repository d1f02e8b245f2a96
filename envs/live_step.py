"""Live backend of ``BlockSizeStep-v0``: the decoder runs in a worker thread and waits for each action.

The decoder calls its per-cycle callback before every cycle; here the callback hands the decoder
state to the environment and blocks until ``step`` supplies the block size.
"""

from __future__ import annotations

import queue
import threading

import numpy as np

from specpolicy.data.prompts import encode_prompt
from specpolicy.envs.live import live_setup
from specpolicy.policy import DEFAULT_CANDIDATES
from specpolicy.state import DecodeState


class _Abort(Exception):
    """Raised inside the decoder thread to end an abandoned episode."""


class LiveStepBackend:
    """One prompt per episode, one decoder cycle per step."""

    def __init__(self, dataset: str = "sharegpt", target: str = "tiny", drafter: str = "tiny",
                 candidates=DEFAULT_CANDIDATES, max_samples: int = 32, max_new_tokens: int = 64,
                 temperature: float = 0.0, device: str = "cpu", pair=None) -> None:
        self.pair, self.prompts, self.decoder = live_setup(dataset, target, drafter, max_samples, max_new_tokens,
                                                           temperature, device, pair)
        self.candidates = tuple(sorted(candidates))
        self.budget = max_new_tokens
        self._thread: threading.Thread | None = None
        self._events: queue.Queue = queue.Queue()
        self._actions: queue.Queue = queue.Queue()

    def _callback(self, state: DecodeState) -> int:
        self._events.put(("state", state))
        action = self._actions.get()
        if action is None:
            raise _Abort
        return action

    def _run(self, ids: list[int]) -> None:
        try:
            self._events.put(("done", self.decoder.generate(ids, self._callback)))
        except _Abort:
            self._events.put(("aborted", None))
        except Exception as exc:  # surface decoder errors in the env's thread
            self._events.put(("error", exc))

    def close(self) -> None:
        """End a running episode's thread."""
        if self._thread is not None and self._thread.is_alive():
            self._actions.put(None)
            self._thread.join()
        self._thread = None
        self._events, self._actions = queue.Queue(), queue.Queue()

    def _next(self):
        kind, payload = self._events.get()
        if kind == "error":
            raise payload
        return kind, payload

    def reset(self, rng: np.random.Generator):
        """Start a prompt; returns (kind, state or trace, prompt id)."""
        self.close()
        prompt = self.prompts[int(rng.integers(len(self.prompts)))]
        ids = encode_prompt(self.pair.tokenizer, prompt, 256)
        self._thread = threading.Thread(target=self._run, args=(ids,), daemon=True)
        self._thread.start()
        kind, payload = self._next()
        return kind, payload, prompt.id

    def step(self, block_size: int):
        """Run one cycle at ``block_size``; returns the next (kind, state or trace)."""
        self._actions.put(int(block_size))
        return self._next()
