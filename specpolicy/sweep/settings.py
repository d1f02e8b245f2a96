"""What defines a sweep: its settings and modes (no torch: the CLI and compare's cache key read them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

from specpolicy import defaults
from specpolicy.arguments import check_block_size, check_candidate_set, check_count, check_temperature


class SweepMode(str, Enum):
    """``replay``: one decode and exact counterfactuals; ``live``: decode every block size (measured time)."""

    replay = "replay"
    live = "live"


class Executor(str, Enum):
    """Where a sweep runs: in this process, or sharded over Ray workers."""

    local = "local"
    ray = "ray"


MODES = tuple(m.value for m in SweepMode)


@dataclass
class SweepSettings:
    """Everything that defines a sweep; all of it goes into the store's metadata."""

    dataset: str = "sharegpt"
    candidates: list[int] = field(default_factory=lambda: list(defaults.SHIPPED_SWEEP_CANDIDATES))
    temperature: float = 0.0
    max_new_tokens: int = defaults.MAX_NEW_TOKENS
    max_prompt_tokens: int = defaults.MAX_PROMPT_TOKENS
    max_samples: int | None = defaults.SWEEP_MAX_SAMPLES
    seed: int = 0
    mode: str = "replay"
    target: str = "tiny"
    drafter: str = "tiny"
    dtype: str = "auto"
    device: str = "cpu"
    reference_block_size: int = defaults.TRAINING_BLOCK_SIZE
    threads: int = defaults.DEFAULT_THREADS
    """torch threads the cost table is measured at (recorded in it; records do not depend on it)"""
    verify_lengths: bool = False
    """replay every anchor a schedule verifying fewer tokens than it drafts can reach (L < B)"""
    confidence_sizes: list[int] = field(default_factory=list)
    """block sizes whose drafts' confidences the replay records (what verify rules read)"""

    def validate(self) -> None:
        """Fail before any model loads when a setting cannot work."""
        if self.mode not in MODES:
            raise ValueError(f"unknown sweep mode {self.mode!r}; use one of {', '.join(MODES)}")
        check_candidate_set(self.candidates)
        check_temperature(self.temperature)
        check_count(self.max_new_tokens, "max_new_tokens", 2)
        check_count(self.max_prompt_tokens, "max_prompt_tokens")
        check_count(self.threads, "threads")
        if self.max_samples is not None:
            check_count(self.max_samples, "max_samples")
        check_count(self.seed, "seed", 0)
        check_block_size(self.reference_block_size)
        if self.confidence_sizes:
            check_candidate_set(self.confidence_sizes, "confidence_sizes")
        missing = sorted(set(self.confidence_sizes) - set(self.candidates))
        if missing:
            raise ValueError(f"--confidences {missing} are not among the candidates "
                             f"{sorted(self.candidates)}; record confidences of swept block sizes only")
        if (self.verify_lengths or self.confidence_sizes) and self.mode != "replay":
            raise ValueError("--verify-lengths and --confidences need --mode replay")

    def prompt_tokens(self, max_positions: int | None) -> int:
        """The most prompt tokens a sweep keeps (the last ones): ``max_prompt_tokens``, less where the
        target's context must also hold the output and the largest block verification reads past it."""
        if max_positions is None:
            return self.max_prompt_tokens
        room = max_positions - self.max_new_tokens - max(self.candidates) - 1
        if room < 1:
            raise ValueError(f"--max-new-tokens {self.max_new_tokens} and block size {max(self.candidates)} "
                             f"leave no room for a prompt in the target's context of {max_positions} "
                             "positions; lower --max-new-tokens")
        return min(self.max_prompt_tokens, room)

    def meta(self) -> dict:
        from specpolicy.data.registry import dataset_fingerprint  # reads the prompt set (transformers' types)

        meta = {**asdict(self), "candidates": sorted(self.candidates),
                "dataset_sha256": dataset_fingerprint(self.dataset)}
        meta.pop("threads")  # timing only: the cost table records it, the records do not depend on it
        meta["confidence_sizes"] = sorted(self.confidence_sizes)
        if not self.verify_lengths and not self.confidence_sizes:  # stores from before verify lengths match
            meta.pop("verify_lengths"), meta.pop("confidence_sizes")
        return meta
