"""Fixed block sizes (DFlash(N)) and the uniform random baseline."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from specpolicy.cycles import check_block_size
from specpolicy.policy import TRAINING_BLOCK_SIZE, Policy, PromptObservation


class FixedPolicy(Policy):
    """Always the same block size: ``fixed16`` is DFlash(16)."""

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


def fixed_policy(arg: str | None, candidates: Sequence[int]) -> FixedPolicy:
    if arg is None or not arg.isdigit():
        raise ValueError(f"fixed needs a block size, e.g. fixed{TRAINING_BLOCK_SIZE}")
    return FixedPolicy(int(arg), candidates)


def random_policy(arg: str | None, candidates: Sequence[int]) -> RandomPolicy:
    return RandomPolicy(candidates, seed=int(arg) if arg and arg.isdigit() else 0)
