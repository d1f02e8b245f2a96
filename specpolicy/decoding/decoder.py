"""The speculative decoding loop: prefill, then cycles planned by a :class:`~specpolicy.cycles.Plan`, lossless
at every block size (greedy at T = 0; positional uniforms at T > 0); B = 1 is plain decoding."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from specpolicy.arguments import check_count, check_real, check_temperature, check_type
from specpolicy.cycles import Plan, run
from specpolicy.decoding.sampling import PositionalUniforms, processed_probs, sample_with_uniforms
from specpolicy.decoding.session import DecodeSession
from specpolicy.decoding.trace import DecodeTrace
from specpolicy.decoding.verify import VerifyResult, match_verify, speculative_sampling_verify
from specpolicy.defaults import GENERATE_MAX_NEW_TOKENS, TRAINING_BLOCK_SIZE
from specpolicy.models.dflash import DFlashDrafter


def max_positions(model: PreTrainedModel) -> int | None:
    """The target's context (its text config's ``max_position_embeddings``; ``None`` if unset)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return getattr(config, "max_position_embeddings", None)


def _stop_ids(model: PreTrainedModel) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


class SpeculativeDecoder:
    """Lossless speculative decoding of a causal LM with a DFlash drafter (batch size 1): ``temperature`` 0 is
    greedy; ``draft_sampling`` verifies sampled drafts by ``min(1, p/q)`` (default: argmax, exact match)."""

    def __init__(
        self,
        target: PreTrainedModel,
        drafter: DFlashDrafter,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        draft_sampling: bool = False,
        stop_token_ids: Sequence[int] | None = None,
        max_new_tokens: int = GENERATE_MAX_NEW_TOKENS,
        record_confidences: bool = False,
    ) -> None:
        check_type(target, torch.nn.Module, "target", "load_pair(target, drafter).target")
        check_type(drafter, DFlashDrafter, "drafter", "load_pair(target, drafter).drafter")
        check_temperature(temperature)
        check_real(top_p, "top_p", 0, 1, strict_low=True)
        check_count(top_k, "top_k (0 keeps every token)", 0)
        if draft_sampling and temperature == 0:
            raise ValueError("draft_sampling needs temperature > 0; at T = 0 drafts are argmax")
        self.target = target
        self.drafter = drafter
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.top_p = float(top_p)
        self.draft_sampling = draft_sampling
        self.stop_token_ids = list(stop_token_ids) if stop_token_ids is not None else _stop_ids(target)
        self.max_new_tokens = max_new_tokens
        self.record_confidences = record_confidences
        self.device = next(target.parameters()).device
        self.embed = target.get_input_embeddings()
        self.lm_head = target.get_output_embeddings()
        self.max_positions = max_positions(target)

    # --- helpers -----------------------------------------------------------------------------------

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def target_tokens(self, logits: torch.Tensor, uniforms: PositionalUniforms,
                      first_pos: int) -> torch.Tensor:
        """The target's token at each of ``logits``' positions ([s, V] -> [s]); first one is ``first_pos``."""
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        probs = processed_probs(logits, self.temperature, self.top_k, self.top_p)
        return sample_with_uniforms(probs, uniforms.get(0, first_pos, logits.shape[0]).to(probs.device))

    def budget(self, max_new_tokens: int | None) -> int:
        """The output budget of one decode: ``max_new_tokens`` or the decoder's; a ValueError below 1."""
        budget = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        return check_count(budget, "max_new_tokens")

    def check_prompt(self, prompt_ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        if isinstance(prompt_ids, str | bytes):
            raise ValueError("prompt_ids must be token ids, got text; encode it first "
                             "(tokenizer(text)['input_ids'])")
        ids = torch.as_tensor(prompt_ids).flatten()
        if ids.numel() == 0:
            raise ValueError("empty prompt: pass at least one token id (apply the chat template first)")
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise ValueError(f"prompt token ids must be integers, got {ids.dtype}")
        ids = ids.to(torch.long)
        vocab = self.embed.num_embeddings
        if int(ids.min()) < 0 or int(ids.max()) >= vocab:
            raise ValueError(f"prompt token ids must lie in [0, {vocab}); got "
                             f"{int(ids.min())}..{int(ids.max())}")
        if self.max_positions is not None and ids.numel() >= self.max_positions:
            raise ValueError(
                f"prompt of {ids.numel()} tokens does not fit the target's context of {self.max_positions} "
                "positions; truncate the prompt"
            )
        return ids

    # --- the loop ----------------------------------------------------------------------------------

    def start(
        self, prompt_ids: Sequence[int] | torch.Tensor, *, max_new_tokens: int | None = None, seed: int = 0
    ) -> DecodeSession:
        """Prefill ``prompt_ids`` [s] -> a :class:`DecodeSession` (``seed``: positional uniforms at T > 0)."""
        return DecodeSession(self, prompt_ids, max_new_tokens=max_new_tokens, seed=seed)

    def generate(
        self,
        prompt_ids: Sequence[int] | torch.Tensor,
        plan: Plan | int = TRAINING_BLOCK_SIZE,
        *,
        max_new_tokens: int | None = None,
        seed: int = 0,
    ) -> DecodeTrace:
        """Decode ``prompt_ids`` [s] with ``plan`` (or a fixed B) until a stop token, the budget or the
        context; a policy's plan needs the prefill: :func:`specpolicy.decoding.engine.decode`."""
        plan = plan if isinstance(plan, Plan) else Plan.fixed(plan)
        session = self.start(prompt_ids, max_new_tokens=max_new_tokens, seed=seed)
        run(session, plan)
        return session.trace()

    def draft_tokens(
        self, draft_logits: torch.Tensor, uniforms: PositionalUniforms | None, first_pos: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Draft tokens [n] from drafter logits [n, V]: argmax, or samples (with their probs [n, V])."""
        if not self.draft_sampling:
            return draft_logits.argmax(dim=-1), None
        probs = processed_probs(draft_logits, self.temperature, self.top_k, self.top_p)
        tokens = sample_with_uniforms(probs, uniforms.get(3, first_pos, probs.shape[0]).to(probs.device))
        return tokens, probs

    def verify(
        self,
        draft: torch.Tensor,
        draft_probs: torch.Tensor | None,
        logits: torch.Tensor,
        uniforms: PositionalUniforms | None,
        first_pos: int,
    ) -> VerifyResult:
        """Apply the verification rule to one block. draft [1, n], logits [n + 1, V]."""
        if draft_probs is None:
            target_tokens = self.target_tokens(logits, uniforms, first_pos)
            return match_verify(draft, target_tokens.unsqueeze(0))
        n = draft.shape[-1]
        target_probs = processed_probs(logits, self.temperature, self.top_k, self.top_p)
        accept_u = uniforms.get(1, first_pos, n).to(logits.device)
        resample_u = uniforms.get(2, first_pos, n + 1).to(logits.device)
        return speculative_sampling_verify(
            draft, draft_probs.unsqueeze(0), target_probs.unsqueeze(0), accept_u.unsqueeze(0),
            resample_u.unsqueeze(0),
        )
