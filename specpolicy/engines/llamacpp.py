"""llama.cpp's ``llama-server`` as an engine (docs/llamacpp.md): ``--spec-type draft-dflash --spec-draft-n-max
N`` drafts B = N + 1, ``--spec-draft-p-min P`` cuts at the first draft below P, ``--spec-type none`` is B = 1.
A stock server is one setting; one built with specpolicy's patch set (:data:`PATCH`) takes settings per
request and returns a record per drafting step. Every server dies with its parent and the pool. No torch."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from specpolicy.defaults import MAX_BLOCK_SIZE
from specpolicy.engines.build import die_with_parent, patched

START_TIMEOUT = 60.0
"""seconds a server may take to load the pair and answer /health"""
LOG_TAIL = 15
"""log lines an error about a server quotes"""
WARMUP_TOKENS = 16
"""tokens of the request that warms a new server (untimed)"""


@dataclass(frozen=True, order=True)
class Setting:
    """One server's speculation: block B (1: ``--spec-type none``) and the p_min cutting a drafted block."""

    block_size: int
    p_min: float = 0.0
    feeds_drafter: bool = False
    """B = 1 on a patched DFlash server: a plain step still feeding the drafter (what a plan's B = 1 costs)"""
    plan: str = ""
    """a per-step plan (a patched server's ``speculative.plan``) choosing B <= ``block_size`` each step"""

    @property
    def name(self) -> str:
        if self.block_size == 1:
            return "none" + (",feeds drafter" if self.feeds_drafter else "")
        return f"n_max={self.block_size - 1}" + (f",p_min={self.p_min:g}" if self.p_min else "") + \
            (",plan" if self.plan else "")

    def flags(self) -> list[str]:
        """The command-line flags of this setting."""
        if self.block_size == 1:
            return ["--spec-type", "none"]
        return ["--spec-type", "draft-dflash", "--spec-draft-n-max", str(self.block_size - 1),
                "--spec-draft-n-min", "0", "--spec-draft-p-min", f"{self.p_min:g}",
                "--no-spec-draft-backend-sampling"]  # the host's logits: whole-vocabulary probabilities


SHARED = Setting(MAX_BLOCK_SIZE)
"""the setting a patched DFlash server starts with: blocks up to the largest (the drafter clamps to its
trained one), each request's own ``speculative.n_max`` and ``p_min`` below it"""


@dataclass(frozen=True)
class Step:
    """One step a patched server recorded (every drafting step; with a plan, its plain steps too): its B,
    drafts drafted (B - 1, fewer where the budget leaves less room), sent to verify (L - 1) and accepted, the
    drafter's top-1 probability (whole vocabulary) per drafted position; ``draft_seconds``: the drafter's
    pass, ``seconds``: the whole step (0: a server built before steps were timed)."""

    block: int
    drafted: int
    verified: int
    accepted: int
    probabilities: tuple[float, ...]
    draft_seconds: float = 0.0
    seconds: float = 0.0

    @classmethod
    def from_json(cls, step: dict) -> Step:
        """The step as the patched server writes it in ``timings.spec_steps`` (milliseconds to seconds)."""
        return cls(int(step["block"]), int(step["drafted"]), int(step["verified"]), int(step["accepted"]),
                   tuple(map(float, step["p"])), float(step.get("draft_ms", 0)) / 1e3,
                   float(step.get("step_ms", 0)) / 1e3)

    def to_json(self) -> dict:
        """The step as the patched server writes it (:meth:`from_json` reads it back)."""
        return {"block": self.block, "drafted": self.drafted, "verified": self.verified,
                "accepted": self.accepted, "p": list(self.probabilities),
                "draft_ms": self.draft_seconds * 1e3, "step_ms": self.seconds * 1e3}


@dataclass(frozen=True)
class Reply:
    """The engine's answer to a prompt: tokens generated, its own counts and timing (prefill excluded)."""

    tokens: tuple[int, ...]
    drafted: int
    """draft tokens the drafter proposed (``timings.draft_n``)"""
    accepted: int
    """drafts the target accepted (``timings.draft_n_accepted``)"""
    seconds: float
    """generation time the server measured (``timings.predicted_ms``)"""
    steps: tuple[Step, ...] = ()
    """a patched server's record of every drafting step (``timings.spec_steps``); empty from a stock server"""

    def response(self, request_id: str) -> dict:
        """This reply as llama-server answers ``/completion`` (tokens and timings, ``spec_steps`` as the
        patched server writes them), with ``id``: what ``import-traces`` reads."""
        steps = [step.to_json() for step in self.steps]
        return {"id": request_id, "tokens": list(self.tokens),
                "timings": {"draft_n": self.drafted, "draft_n_accepted": self.accepted,
                            "predicted_ms": self.seconds * 1e3} | ({"spec_steps": steps} if steps else {})}

    @property
    def cycles(self) -> int:
        """Target passes after prefill (which gives the first token): each commits its accepted + 1."""
        return max(0, len(self.tokens) - 1 - self.accepted)

    @property
    def tau(self) -> float:
        """Mean accepted drafts + 1 per cycle (the prefill's token is no cycle's; 0 without a cycle)."""
        return (len(self.tokens) - 1) / self.cycles if self.cycles else 0.0


def server_command(binary: Path, target: Path, drafter: Path, setting: Setting, threads: int,
                   port: int) -> list[str]:
    """The full ``llama-server`` command line of one setting (threads pinned for target and drafter, float32
    KV caches, one slot, no prompt cache reuse across requests, loopback only)."""
    command = [str(binary), "-m", str(target), "--host", "127.0.0.1", "--port", str(port), "-np", "1",
               "-c", "4096", "-t", str(threads), "-tb", str(threads), "-ctk", "f32", "-ctv", "f32",
               "--no-webui", "--seed", "0", *setting.flags()]
    if setting.block_size > 1:
        command += ["-md", str(drafter), "-td", str(threads), "-tbd", str(threads), "-ctkd", "f32", "-ctvd",
                    "f32"]
    return command


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """One running ``llama-server`` with one :class:`Setting`; :meth:`stop` ends it."""

    def __init__(self, command: list[str], port: int) -> None:
        self.command, self.port, self.url = command, port, f"http://127.0.0.1:{port}"
        # nameless, so gone with this process however it ends (a kill -9 left named ones behind)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)

    @classmethod
    def start(cls, binary: Path, target: Path, drafter: Path, setting: Setting, threads: int) -> Server:
        """Start a server on a free loopback port, wait until it answers /health (a port taken in between is
        retried on another) and warm it with one short request: no measured request pays its first touches."""
        for _ in range(3):
            port = _free_port()
            server = cls(server_command(binary, target, drafter, setting, threads, port), port)
            try:
                server._wait_healthy()
                server.complete([0], WARMUP_TOKENS)
                return server
            except ValueError as error:
                server.stop()
                if "bind" not in str(error):
                    raise
        raise ValueError("llama-server could not bind a loopback port three times; free some ports and retry")

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ValueError(f"llama-server exited with code {self.process.returncode} while starting "
                                 f"({' '.join(self.command)}):\n{self.log_tail()}")
            health = f"{self.url}/health"
            with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=2) as response:
                if response.status == 200:
                    return
            time.sleep(0.1)
        raise ValueError(f"llama-server did not answer /health within {START_TIMEOUT:g} "
                         f"s:\n{self.log_tail()}")

    def complete(self, prompt: list[int], max_new_tokens: int, setting: Setting | None = None) -> Reply:
        """Greedy tokens for ``prompt`` (token ids); ``setting``: the request's block and p_min (patched)."""
        body = {"prompt": [int(t) for t in prompt], "n_predict": int(max_new_tokens), "temperature": 0.0,
                "top_k": 1, "cache_prompt": False, "return_tokens": True, "seed": 0}
        if setting is not None:
            body |= {"speculative.n_max": setting.block_size - 1, "speculative.p_min": setting.p_min}
            if setting.plan:
                body["speculative.plan"] = json.loads(setting.plan)
        request = urllib.request.Request(f"{self.url}/completion", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                answer = json.load(response)
        except (urllib.error.URLError, OSError) as error:
            raise ValueError(f"llama-server at {self.url} failed a request "
                             f"({error}):\n{self.log_tail()}") from None
        timings = answer.get("timings", {})
        steps = tuple(Step.from_json(step) for step in timings.get("spec_steps", ()))
        return Reply(tuple(answer.get("tokens", ())), int(timings.get("draft_n", 0)),
                     int(timings.get("draft_n_accepted", 0)), float(timings.get("predicted_ms", 0.0)) / 1000,
                     steps)

    def log_tail(self) -> str:
        """The server's last :data:`LOG_TAIL` log lines (what an error shows)."""
        return "\n".join(self.log_text().splitlines()[-LOG_TAIL:])

    def log_text(self) -> str:
        """Everything the server has logged (read at an offset: the server's own write position stays)."""
        fd = self.log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL after 5 s) and close its log (a nameless file, so gone)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class ServerPool(contextlib.AbstractContextManager):
    """Servers started when first asked for, all stopped when the ``with`` block ends: plain decoding's own
    server (B = 1), and for speculation one DFlash server taking every :class:`Setting` per request (a patched
    binary) or a server per setting (a stock one)."""

    def __init__(self, binary: Path, target: Path, drafter: Path, threads: int) -> None:
        self.binary, self.target, self.drafter, self.threads = binary, target, drafter, threads
        self.servers: dict[Setting, Server] = {}
        self.per_request = patched(binary)

    def __getitem__(self, setting: Setting) -> Server | PerRequest:
        if self.per_request and (setting.block_size > 1 or setting.feeds_drafter):
            return PerRequest(self._server(SHARED), setting)
        return self._server(setting)

    def _server(self, setting: Setting) -> Server:
        if setting not in self.servers:
            self.servers[setting] = Server.start(self.binary, self.target, self.drafter, setting,
                                                 self.threads)
        return self.servers[setting]

    def close(self) -> None:
        while self.servers:
            self.servers.popitem()[1].stop()

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class PerRequest:
    """A patched server's :class:`Setting` for one request: what :class:`ServerPool` gives for B > 1."""

    server: Server
    setting: Setting

    def complete(self, prompt: list[int], max_new_tokens: int) -> Reply:
        return self.server.complete(prompt, max_new_tokens, self.setting)
