"""The speculative decoding loop: prefill, then draft -> verify -> commit cycles.

The block size comes from the caller, once per prompt (an ``int``) or every cycle (a callable
receiving a :class:`DecodeState`). ``B = 1`` is plain autoregressive decoding through the same code.
Verification never changes the output: at T = 0 it is the target's greedy decode; at T > 0 the
target's samples use uniforms indexed by absolute position, so with a deterministic (argmax) draft
the output is the same for every block size, given the seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
from transformers import PreTrainedModel

from specpolicy.decoding.sampling import PositionalUniforms, processed_probs, sample_with_uniforms
from specpolicy.decoding.target import crop_cache, new_cache, target_forward
from specpolicy.decoding.trace import CycleRecord, DecodeTrace
from specpolicy.decoding.verify import VerifyResult, match_verify, speculative_sampling_verify
from specpolicy.models.dflash import DFlashDrafter
from specpolicy.state import DecodeState

BlockSizeFn = Callable[[DecodeState], int]


def commit_tokens(new_tokens: list[int], stops: set[int], room: int) -> tuple[list[int], str]:
    """The tokens a cycle keeps, and why decoding ends there (``""`` when it goes on).

    Cuts after the first stop token, then to the ``room`` left in the budget; a stop token cut off
    by the budget counts as the budget ending the decode. Live decoding and exact replay share it.
    """
    reason = ""
    stop_at = next((i for i, token in enumerate(new_tokens) if token in stops), None)
    if stop_at is not None:
        new_tokens, reason = new_tokens[: stop_at + 1], "stop_token"
    if len(new_tokens) > room or (len(new_tokens) == room and not reason):
        new_tokens, reason = new_tokens[:room], "max_new_tokens"
    return new_tokens, reason


def _max_positions(model: PreTrainedModel) -> int | None:
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
    """Lossless speculative decoding of a Hugging Face causal LM with a DFlash drafter (batch size 1).

    Args:
        target: the causal LM to decode from (frozen).
        drafter: a DFlash drafter reading ``target``'s hidden states.
        temperature: 0 for greedy; > 0 samples the target's processed distribution.
        top_k: keep the k most likely target tokens (0 keeps all; T > 0 only).
        top_p: nucleus filtering of the target distribution (1.0 keeps all; T > 0 only).
        draft_sampling: sample drafts from the drafter's distribution and verify with speculative
            sampling (``min(1, p/q)``); default: argmax drafts verified by exact match.
        stop_token_ids: default: the target's ``eos_token_id``.
        max_new_tokens: default output budget.
    """

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
        max_new_tokens: int = 256,
    ) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
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
        self.device = next(target.parameters()).device
        self.embed = target.get_input_embeddings()
        self.lm_head = target.get_output_embeddings()
        self.max_positions = _max_positions(target)

    # --- helpers -----------------------------------------------------------------------------------

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _target_tokens(self, logits: torch.Tensor, uniforms: PositionalUniforms, first_pos: int) -> torch.Tensor:
        """The target's token at each of ``logits``' positions ([s, V] -> [s]); first one is ``first_pos``."""
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        probs = processed_probs(logits, self.temperature, self.top_k, self.top_p)
        return sample_with_uniforms(probs, uniforms.get(0, first_pos, logits.shape[0]).to(probs.device))

    def _check_prompt(self, prompt_ids: Sequence[int] | torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(prompt_ids, dtype=torch.long).flatten()
        if ids.numel() == 0:
            raise ValueError("empty prompt: pass at least one token id (apply the chat template first)")
        vocab = self.embed.num_embeddings
        if int(ids.min()) < 0 or int(ids.max()) >= vocab:
            raise ValueError(f"prompt token ids must lie in [0, {vocab}); got {int(ids.min())}..{int(ids.max())}")
        if self.max_positions is not None and ids.numel() >= self.max_positions:
            raise ValueError(
                f"prompt of {ids.numel()} tokens does not fit the target's context of {self.max_positions} "
                "positions; truncate the prompt"
            )
        return ids

    @staticmethod
    def _check_block_size(block_size: int) -> int:
        if isinstance(block_size, bool) or int(block_size) != block_size or block_size < 1:
            raise ValueError(f"block size must be an integer >= 1 (1 = autoregressive), got {block_size!r}")
        return int(block_size)

    # --- the loop ----------------------------------------------------------------------------------

    @torch.inference_mode()
    def generate(
        self,
        prompt_ids: Sequence[int] | torch.Tensor,
        block_size: int | BlockSizeFn = 16,
        *,
        max_new_tokens: int | None = None,
        seed: int = 0,
    ) -> DecodeTrace:
        """Decode one prompt.

        Args:
            prompt_ids: token ids [s] of the (templated) prompt.
            block_size: a fixed block size B, or a callback picking B before every cycle.
            max_new_tokens: output budget (default: the decoder's).
            seed: seeds the positional uniforms (T > 0 only).
        Returns:
            a :class:`DecodeTrace`.
        """
        choose: BlockSizeFn
        if callable(block_size):
            choose = block_size
        else:
            fixed = self._check_block_size(block_size)
            choose = lambda state: fixed  # noqa: E731
        ids = self._check_prompt(prompt_ids)
        budget = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        if budget < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {budget}")
        prompt_len = ids.numel()
        uniforms = PositionalUniforms(seed, self.device) if self.temperature > 0 else None
        stops = set(self.stop_token_ids)
        device = self.device

        # 1. Prefill: the target reads the prompt and emits the first output token.
        self._sync()
        t0 = time.perf_counter()
        cache = new_cache(self.target)
        positions = torch.arange(prompt_len, device=device).unsqueeze(0)
        logits, hidden = target_forward(self.target, ids.to(device).unsqueeze(0), positions, cache, logits_to_keep=1)
        prefill_logits = logits[0, -1].float()
        first = int(self._target_tokens(logits[0, -1:], uniforms, prompt_len)[0])
        pending = [self.drafter.context_features(hidden)]  # context not yet in the drafter cache: [1, c, L*H] each
        self._sync()
        prefill_seconds = time.perf_counter() - t0

        output = [first]
        cycles: list[CycleRecord] = []
        drafter_cache = self.drafter.new_cache()
        stop_reason = "stop_token" if first in stops else ("max_new_tokens" if budget <= 1 else "")
        state = DecodeState(prefill_logits, prompt_len, prompt_len, 0, 1)
        t_loop = time.perf_counter()
        while not stop_reason:
            start = prompt_len + len(output) - 1  # position of the anchor, not yet seen by the target
            # 2. Choose this cycle's block size.
            state.position, state.cycle, state.generated = start, len(cycles), len(output)
            size = self._check_block_size(choose(state))
            if self.max_positions is not None and start + size > self.max_positions:
                stop_reason = "context"
                break
            anchor = torch.tensor([[output[-1]]], device=device)
            # 3. Draft: one drafter pass over [anchor, mask * (B-1)] given the pending context.
            draft_seconds = 0.0
            draft = anchor.new_empty((1, 0))
            draft_probs = None
            if size > 1:
                self._sync()
                t_draft = time.perf_counter()
                block = torch.full((1, size), self.drafter.mask_token_id, device=device)
                block[0, 0] = output[-1]
                cached = len(drafter_cache)
                draft_positions = torch.arange(cached, start + size, device=device).unsqueeze(0)
                context = pending[0] if len(pending) == 1 else torch.cat(pending, dim=1)
                hidden_block = self.drafter(self.embed(block), context, draft_positions, drafter_cache)
                draft_logits = self.lm_head(hidden_block[:, 1:, :])
                drafter_cache.crop(start)  # the block's own keys/values never persist
                pending = []
                self._sync()
                draft_seconds = time.perf_counter() - t_draft
                draft, draft_probs = self._draft_tokens(draft_logits[0], uniforms, start + 1)
            # 4. Verify: the target reads anchor + drafts in one forward.
            self._sync()
            t_verify = time.perf_counter()
            block_ids = torch.cat([anchor, draft.view(1, -1)], dim=1)
            block_positions = torch.arange(start, start + size, device=device).unsqueeze(0)
            logits, hidden = target_forward(self.target, block_ids, block_positions, cache)
            self._sync()
            verify_seconds = time.perf_counter() - t_verify
            result = self._verify(draft.view(1, -1), draft_probs, logits[0], uniforms, start + 1)
            accepted = int(result.accepted[0])
            # 5. Commit accepted drafts + the target's next token; crop caches back to the new anchor.
            new_tokens = [*draft.view(-1)[:accepted].tolist(), int(result.next_token[0])]
            crop_cache(cache, start + accepted + 1)
            pending.append(self.drafter.context_features(hidden)[:, : accepted + 1])
            # 6. Stop on a stop token or the budget; keep everything else, mask-id tokens included.
            new_tokens, stop_reason = commit_tokens(new_tokens, stops, budget - len(output))
            output.extend(new_tokens)
            cycles.append(CycleRecord(size, accepted, len(new_tokens), draft_seconds, verify_seconds))
            state.record(size, accepted)
        self._sync()
        decode_seconds = time.perf_counter() - t_loop
        return DecodeTrace(ids.tolist(), output, cycles, prefill_seconds, decode_seconds, stop_reason,
                           prefill_logits.cpu())

    def _draft_tokens(
        self, draft_logits: torch.Tensor, uniforms: PositionalUniforms | None, first_pos: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Draft tokens [n] from drafter logits [n, V]: argmax, or samples (with their probs [n, V])."""
        if not self.draft_sampling:
            return draft_logits.argmax(dim=-1), None
        probs = processed_probs(draft_logits, self.temperature, self.top_k, self.top_p)
        tokens = sample_with_uniforms(probs, uniforms.get(3, first_pos, probs.shape[0]).to(probs.device))
        return tokens, probs

    def _verify(
        self,
        draft: torch.Tensor,
        draft_probs: torch.Tensor | None,
        logits: torch.Tensor,
        uniforms: PositionalUniforms | None,
        first_pos: int,
    ) -> VerifyResult:
        """Apply the verification rule to one block. draft [1, n], logits [n + 1, V]."""
        if draft_probs is None:
            target_tokens = self._target_tokens(logits, uniforms, first_pos)
            return match_verify(draft, target_tokens.unsqueeze(0))
        n = draft.shape[-1]
        target_probs = processed_probs(logits, self.temperature, self.top_k, self.top_p)
        accept_u = uniforms.get(1, first_pos, n).to(logits.device)
        resample_u = uniforms.get(2, first_pos, n + 1).to(logits.device)
        return speculative_sampling_verify(
            draft, draft_probs.unsqueeze(0), target_probs.unsqueeze(0), accept_u.unsqueeze(0),
            resample_u.unsqueeze(0),
        )
