"""Plain autoregressive decoding, the baseline every speedup divides by: transformers' ``generate``'s work
(one step per token, no hidden states), with the speculative decoder's tokens (same uniforms at T > 0)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from specpolicy.cycles import CycleRecord
from specpolicy.decoding.decoder import SpeculativeDecoder
from specpolicy.decoding.sampling import PositionalUniforms
from specpolicy.decoding.session import prefill
from specpolicy.decoding.trace import DecodeTrace
from specpolicy.models.target import target_forward
from specpolicy.state import commit_tokens


@torch.inference_mode()
def plain_decode(
    decoder: SpeculativeDecoder, prompt_ids: Sequence[int] | torch.Tensor, *,
                 max_new_tokens: int | None = None,
    seed: int = 0,
) -> DecodeTrace:
    """Decode ``prompt_ids`` [s] with the ``decoder``'s target alone; every cycle is one step (B = 1)."""
    ids = decoder.check_prompt(prompt_ids)
    budget = decoder.budget(max_new_tokens)
    device, prompt_len, stops = decoder.device, ids.numel(), set(decoder.stop_token_ids)
    uniforms = PositionalUniforms(seed, device) if decoder.temperature > 0 else None
    # 1. Prefill, as the speculative session does (without the hidden states only the drafter reads).
    cache, prefill_logits, _, first, prefill_seconds = prefill(decoder, ids, uniforms, hidden_states=False)
    output = [first]
    stop_reason = "stop_token" if output[0] in stops else ("max_new_tokens" if budget <= 1 else "")
    cycles: list[CycleRecord] = []
    t_loop = time.perf_counter()
    while not stop_reason:
        position = prompt_len + len(output) - 1
        if decoder.max_positions is not None and position + 1 > decoder.max_positions:
            stop_reason = "context"
            break
        # 2. One step: the target reads the last token and emits the next.
        decoder.sync()
        t_step = time.perf_counter()
        logits, _ = target_forward(decoder.target, torch.tensor([[output[-1]]], device=device),
                                   torch.tensor([[position]], device=device), cache, logits_to_keep=1,
                                   hidden_states=False)
        token = int(decoder.target_tokens(logits[0, -1:], uniforms, position + 1)[0])
        decoder.sync()
        # 3. Commit, stopping on a stop token or the budget.
        new_tokens, stop_reason = commit_tokens([token], stops, budget - len(output))
        output.extend(new_tokens)
        cycles.append(CycleRecord(1, 0, len(new_tokens), 0.0, time.perf_counter() - t_step))
    decoder.sync()
    return DecodeTrace(ids.tolist(), output, cycles, prefill_seconds, time.perf_counter() - t_loop,
                       stop_reason, prefill_logits.cpu())


def own_answer(decoder: SpeculativeDecoder) -> Callable[[list[int]], list[int]]:
    """The target's own answer to a conversation (prompt ids -> output ids), a plain decode remembered per
    conversation, that multi-turn prompts continue after (at T = 0, what every speculative decode emits)."""
    answers: dict[tuple[int, ...], list[int]] = {}

    def answer(prompt_ids: list[int]) -> list[int]:
        key = tuple(prompt_ids)
        if key not in answers:
            answers[key] = list(plain_decode(decoder, prompt_ids).output_ids)
        return answers[key]

    return answer
