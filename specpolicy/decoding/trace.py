"""What a decode did: per-cycle records, tokens and timings."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specpolicy.cycles import CycleRecord
from specpolicy.state import mean_acceptance


@dataclass
class DecodeTrace:
    """Result of one decode. The first output token comes from prefill; the rest from cycles."""

    prompt_ids: list[int]
    output_ids: list[int]
    cycles: list[CycleRecord]
    prefill_seconds: float
    decode_seconds: float
    stop_reason: str
    prefill_logits: torch.Tensor | None = field(default=None, repr=False)
    confidences: list[list[float]] = field(default_factory=list, repr=False)
    """per drafted block (B > 1, in order), the drafter's probability of each draft (when recorded)"""

    @property
    def tau(self) -> float:
        """Mean acceptance length (accepted + 1) over cycles; 0 for a decode without cycles."""
        return mean_acceptance(self.cycles)

    @property
    def cycle_tokens(self) -> int:
        """Tokens committed by cycles (the output minus the prefill token)."""
        return sum(c.committed for c in self.cycles)

    @property
    def forward_seconds(self) -> float:
        """Seconds inside drafter and target forward calls during the cycles."""
        return sum(c.draft_seconds + c.verify_seconds for c in self.cycles)

    @property
    def tokens_per_second(self) -> float:
        """Tokens committed by cycles per decode second (prefill excluded)."""
        return self.cycle_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0
