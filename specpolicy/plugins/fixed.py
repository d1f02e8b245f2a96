"""Fixed block sizes (DFlash(N)), the uniform random baseline, and per-prompt sizes read from a file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from specpolicy.arguments import check_block_size
from specpolicy.policy import TRAINING_BLOCK_SIZE, Policy, PromptObservation


class FixedPolicy(Policy):
    """Always the same block size: ``fixed16`` is DFlash(16), whatever the candidates (the range the other
    policies of a comparison choose over; as actions, :meth:`predict` refuses a set without it)."""

    def __init__(self, block_size: int, candidates: Sequence[int]) -> None:
        super().__init__(candidates)
        self.block_size = check_block_size(block_size)  # the engine's one rule: 1..MAX_BLOCK_SIZE

    def select(self, observation: PromptObservation) -> int:
        return self.block_size

    def choices(self) -> set[int]:
        return {self.block_size}


class RandomPolicy(Policy):
    """Uniform over the candidates, fixed per prompt id (and seed), so runs are reproducible."""

    def __init__(self, candidates: Sequence[int], seed: int = 0) -> None:
        super().__init__(candidates)
        self.seed = seed

    def select(self, observation: PromptObservation) -> int:
        digest = hashlib.sha256(f"{self.seed}:{observation.prompt_id}".encode()).digest()
        if not observation.prompt_id:  # no id: hash the features instead
            digest = hashlib.sha256(observation.logits.tobytes()).digest()
        return self.candidates[int.from_bytes(digest[:8], "little") % len(self.candidates)]


class ChoicesPolicy(Policy):
    """The block size a file names per prompt id (``{"gsm8k:0": 16}``, e.g. ``import-blockpilot``'s
    ``authors_choices.json``); it knows only those prompts, so it runs in replay."""

    needs_sweep = True

    def __init__(self, path: str | Path) -> None:
        path = Path(path).expanduser()
        try:
            sizes = json.loads(path.read_text(encoding="utf-8"))
            self.sizes = {str(k): check_block_size(v) for k, v in sizes.items()}
        except FileNotFoundError:
            raise FileNotFoundError(f"choices file {path} is missing; pass a JSON object of prompt id -> "
                                    "block size"
                                    ) from None
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError, TypeError, ValueError) as error:
            raise ValueError(f"{path} is not a JSON object of prompt id -> block size ({error})") from None
        if not self.sizes:
            raise ValueError(f"{path} names no prompt")
        super().__init__(sorted(set(self.sizes.values())))
        self.path = path

    def select(self, observation: PromptObservation) -> int:
        if observation.prompt_id not in self.sizes:
            raise ValueError(f"{self.path} names no block size for prompt {observation.prompt_id!r}; it "
                             f"covers {len(self.sizes)} other prompts")
        return self.sizes[observation.prompt_id]


def choices_policy(arg: str | None, candidates: Sequence[int]) -> ChoicesPolicy:
    if not arg:
        raise ValueError("choices needs a file: choices:PATH (a JSON object of prompt id -> block size)")
    return ChoicesPolicy(arg)


def fixed_policy(arg: str | None, candidates: Sequence[int]) -> FixedPolicy:
    if arg is None or not arg.isdigit():
        raise ValueError(f"fixed needs a block size, e.g. fixed{TRAINING_BLOCK_SIZE}")
    return FixedPolicy(int(arg), candidates)


def random_policy(arg: str | None, candidates: Sequence[int]) -> RandomPolicy:
    if arg is not None and not (arg.isascii() and arg.isdigit()):
        raise ValueError(f"the argument is a seed, as in random:7; got {arg!r}")
    return RandomPolicy(candidates, seed=int(arg or 0))
