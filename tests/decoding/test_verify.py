"""Verification rules are distribution-preserving (seeded statistical tests that can fail)."""

from __future__ import annotations

import pytest
import torch

from specpolicy.decoding.sampling import processed_probs, sample_with_uniforms
from specpolicy.decoding.verify import greedy_verify, match_verify, speculative_sampling_verify

N = 200_000
V = 5


def _dists(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    p0, p1 = torch.softmax(torch.randn(2, V, generator=g) * 1.5, dim=-1)
    q0 = torch.softmax(torch.randn(V, generator=g) * 1.5, dim=-1)
    return p0, p1, q0


def assert_matches(samples: torch.Tensor, probs: torch.Tensor) -> None:
    """Each token's frequency lies within 5 standard errors of its probability."""
    n = len(samples)
    freq = torch.bincount(samples, minlength=len(probs)).double() / n
    tolerance = 5 * torch.sqrt(probs.double() * (1 - probs.double()) / n) + 1e-9
    assert torch.all((freq - probs.double()).abs() <= tolerance), (freq.tolist(), probs.tolist())


def emitted(draft: torch.Tensor, result) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """First emitted token per row, and for rows that accepted d0 the second emitted token."""
    first = torch.where(result.accepted >= 1, draft[:, 0], result.next_token)
    kept = result.accepted >= 1
    second = torch.where(result.accepted >= 2, draft[:, 1], result.next_token)
    return first, second[kept], kept


def test_inverse_cdf_sampler_is_exact_on_a_grid():
    probs = torch.tensor([0.1, 0.0, 0.25, 0.65])
    grid = (torch.arange(10_000, dtype=torch.float64) + 0.5) / 10_000
    tokens = sample_with_uniforms(probs.expand(len(grid), -1), grid)
    freq = torch.bincount(tokens, minlength=4).double() / len(grid)
    assert torch.allclose(freq, probs.double(), atol=1e-4)
    assert int((tokens == 1).sum()) == 0


def test_sampler_never_returns_zero_probability_tokens():
    probs = torch.tensor([[0.0, 0.5, 0.5, 0.0]]).expand(4, -1)
    tokens = sample_with_uniforms(probs, torch.tensor([0.0, 0.4999, 0.5, 1.0 - 1e-12], dtype=torch.float64))
    assert set(tokens.tolist()) <= {1, 2}


@pytest.mark.parametrize("seed", [0, 1])
def test_match_rule_with_deterministic_draft_preserves_target_distribution(seed):
    p0, p1, _ = _dists(seed)
    g = torch.Generator().manual_seed(100 + seed)
    draft_token = int(torch.argmax(p0 * torch.rand(V, generator=g)))
    draft = torch.tensor([[draft_token, 2]]).expand(N, -1)
    u = torch.rand(N, 3, generator=g, dtype=torch.float64)
    target_tokens = torch.stack(
        [sample_with_uniforms(p0.expand(N, -1), u[:, 0]), sample_with_uniforms(p1.expand(N, -1), u[:, 1]),
         sample_with_uniforms(p1.expand(N, -1), u[:, 2])], dim=1)
    first, second, _ = emitted(draft, match_verify(draft, target_tokens))
    assert_matches(first, p0)
    assert_matches(second, p1)


@pytest.mark.parametrize("seed", [0, 1])
def test_speculative_sampling_rule_preserves_target_distribution(seed):
    p0, p1, q0 = _dists(seed)
    q1 = torch.softmax(torch.randn(V, generator=torch.Generator().manual_seed(seed + 7)), dim=-1)
    g = torch.Generator().manual_seed(200 + seed)
    u = torch.rand(N, 6, generator=g, dtype=torch.float64)
    draft = torch.stack([sample_with_uniforms(q0.expand(N, -1), u[:, 0]),
                         sample_with_uniforms(q1.expand(N, -1), u[:, 1])], dim=1)
    q = torch.stack([q0, q1]).expand(N, -1, -1)
    p = torch.stack([p0, p1, p1]).expand(N, -1, -1)
    result = speculative_sampling_verify(draft, q, p, u[:, 2:4], u[:, 3:6])
    first, second, _ = emitted(draft, result)
    assert_matches(first, p0)
    assert_matches(second, p1)


def test_the_statistical_check_rejects_a_biased_rule():
    """Negative control: claiming the wrong draft distribution biases the output and the check fails."""
    p0, _, q0 = _dists(0)
    g = torch.Generator().manual_seed(300)
    u = torch.rand(N, 4, generator=g, dtype=torch.float64)
    draft = sample_with_uniforms(q0.expand(N, -1), u[:, 0]).unsqueeze(1)
    wrong_q = torch.full((N, 1, V), 1.0 / V)
    result = speculative_sampling_verify(draft, wrong_q, p0.expand(N, 2, -1), u[:, 1:2], u[:, 2:4])
    first, _, _ = emitted(torch.cat([draft, draft], dim=1), result)
    with pytest.raises(AssertionError):
        assert_matches(first, p0)


def test_greedy_verify_longest_prefix():
    draft = torch.tensor([[4, 5, 6], [9, 5, 6], [4, 5, 6]])
    logits = torch.full((3, 4, 10), -1.0)
    for row, tokens in enumerate([[4, 5, 6, 7], [4, 5, 6, 7], [4, 5, 1, 7]]):
        logits[row, torch.arange(4), torch.tensor(tokens)] = 1.0
    result = greedy_verify(draft, logits)
    assert result.accepted.tolist() == [3, 0, 2]
    assert result.next_token.tolist() == [7, 4, 1]


def test_processed_probs_filters():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert (processed_probs(logits, 1.0, top_k=2)[0, 2:] == 0).all()
    nucleus = processed_probs(logits, 1.0, top_p=0.5)[0]
    assert nucleus[0] == 1.0 and nucleus.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="temperature > 0"):
        processed_probs(logits, 0.0)
