"""Target-distribution processing (temperature, top-k, top-p) and inverse-CDF sampling with the caller's
uniforms, indexed by absolute position so a token is drawn alike at every block size."""

from __future__ import annotations

import torch


def processed_probs(logits: torch.Tensor, temperature: float, top_k: int = 0,
                    top_p: float = 1.0) -> torch.Tensor:
    """Probabilities [..., V] float32 of ``logits`` [..., V] after temperature (> 0), top-k and top-p."""
    if temperature <= 0:
        raise ValueError("processed_probs needs temperature > 0; temperature 0 is greedy decoding")
    scores = logits.float() / temperature
    if top_k and top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample_with_uniforms(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling of ``probs`` [..., V] (unnormalised) with ``uniforms`` [...] in [0, 1) ->
    LongTensor [...]; a zero-probability token is never returned."""
    cdf = torch.cumsum(probs.double(), dim=-1)
    target = (uniforms.double() * cdf[..., -1]).unsqueeze(-1)
    index = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    last_positive = probs.shape[-1] - 1 - torch.argmax((probs.flip(-1) > 0).int(), dim=-1)
    return torch.minimum(index, last_positive)


class PositionalUniforms:
    """Uniforms in [0, 1) by (stream, absolute position), fixed by a seed (streams: 0 target samples, 1
    acceptance, 2 residuals, 3 drafter), made per ``BLOCK`` positions: none depends on lookahead."""

    BLOCK = 1024

    def __init__(self, seed: int, device: torch.device | str = "cpu") -> None:
        self.seed = int(seed)
        self.device = device
        self._blocks: dict[tuple[int, int], torch.Tensor] = {}

    def _block(self, stream: int, index: int) -> torch.Tensor:
        key = (stream, index)
        if key not in self._blocks:
            block_seed = (self.seed * 1_000_003 + stream * 7_919 + index * 104_729) % (2**63)
            generator = torch.Generator().manual_seed(block_seed)
            self._blocks[key] = torch.rand(self.BLOCK, generator=generator,
                                           dtype=torch.float64).to(self.device)
        return self._blocks[key]

    def get(self, stream: int, start: int, count: int) -> torch.Tensor:
        """Uniforms for positions ``start .. start + count - 1``: float64 [count]."""
        first, last = start // self.BLOCK, (start + count - 1) // self.BLOCK
        values = torch.cat([self._block(stream, i) for i in range(first, last + 1)])
        offset = start - first * self.BLOCK
        return values[offset : offset + count]


def draft_confidences(draft_logits: torch.Tensor, draft: torch.Tensor) -> tuple[list[float], list[float]]:
    """The drafter's probability of each drafted token and its entropy (nats): ``draft_logits`` [n, V],
    ``draft`` [n] -> two lists of n floats (rounded by :func:`round_confidences`)."""
    log_probs = torch.log_softmax(draft_logits.float(), dim=-1)
    chosen = log_probs.gather(-1, draft.view(-1, 1)).squeeze(-1).exp()
    entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
    return round_confidences(chosen).cpu().tolist(), round_confidences(entropy).cpu().tolist()


def round_confidences(probabilities: torch.Tensor) -> torch.Tensor:
    """Values rounded to float16 precision (kept as float32), so a batched replay pass and a live pass, which
    differ in the last float32 bits, hand a verify rule the same number."""
    return probabilities.to(torch.float16).float()
