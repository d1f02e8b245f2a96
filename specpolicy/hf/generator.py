"""A specpolicy plan inside transformers' DFlash ``generate()``, the only module on its private API: a
``DFlashTokenCandidateGenerator`` subclass swapped in through ``_get_candidate_generator`` (5.15 and 5.24)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from transformers.generation.candidate_generator import DFlashTokenCandidateGenerator

from specpolicy.arguments import check_block_size
from specpolicy.cycles import CycleRecord, Plan
from specpolicy.decoding.sampling import draft_confidences
from specpolicy.models.target import cache_kwarg
from specpolicy.state import DecodeState, DraftedBlock, context_cap

if TYPE_CHECKING:
    from transformers import PreTrainedModel

PlanFactory = Callable[[DecodeState], Plan]
"""the state right after prefill -> the prompt's :class:`Plan` (B before every cycle, L after each draft)"""


class PolicyCandidateGenerator(DFlashTokenCandidateGenerator):
    """DFlash candidates with B chosen before every cycle by a plan; ``cycles`` (this call's records) and
    ``state`` (what the plan read last; ``None`` before prefill)."""

    def __init__(self, *args: Any, plans: PlanFactory, max_positions: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.device = self.assistant_model.device  # set by transformers >= 5.16 too, not by 5.15
        self.make_plan = plans
        self.plan: Plan | None = None
        self.max_positions = max_positions
        self.cycles: list[CycleRecord] = []
        self.state: DecodeState | None = None
        self.pending: list[torch.Tensor] = []  # target features [1, c, L*H] the drafter has not read yet
        self.drafted = 0  # positions of the last drafted block still in the drafter's cache
        self.size = 0  # block size of the cycle being verified
        self.candidates = torch.empty(0, dtype=torch.long)  # its drafts [B - 1]

    def get_candidates(self, input_ids: torch.LongTensor, model_kwargs: dict[str, Any], model_outputs: Any,
                       is_first_iteration: bool, n_last_matches: int, **kwargs: Any
                       ) -> tuple[torch.LongTensor, torch.Tensor | None]:
        """input_ids [1, s] -> (input_ids + candidates [1, s + B - 1], their logits [1, B - 1, V])."""
        if is_first_iteration:  # transformers runs the prefill forward before any draft
            return input_ids, None
        self._read_context(input_ids, model_outputs, n_last_matches)
        start = input_ids.shape[1] - 1  # the anchor's position
        self.size = check_block_size(self.plan.block(self.state))  # the policy's B, kept in the record
        # what the context lets the target verify
        size = max(1, context_cap(self.size, start, self.max_positions))
        self.length, self.candidates = size, input_ids.new_empty(0)
        if size == 1:
            return input_ids, None
        logits = self._draft(input_ids, model_kwargs, start, size)
        candidate_ids = self._pick(input_ids, logits)
        # the policy's B, the drafts
        length = self.plan.cycle_length(self.state, self.size, lambda: DraftedBlock(
            self.size, *map(tuple, draft_confidences(logits[0], candidate_ids[0, input_ids.shape[1]:]))))
        if length is not None:  # the second knob: the target checks only the first L - 1 drafts
            self.length = min(length, size)
            keep = input_ids.shape[1] + self.length - 1
            candidate_ids, logits = candidate_ids[:, :keep], logits[:, : self.length - 1]
        self.candidates = candidate_ids[0, input_ids.shape[1]:]
        # L = 1: a plain step, as transformers runs one
        return candidate_ids, logits if self.length > 1 else None

    def _read_context(self, input_ids: torch.Tensor, model_outputs: Any, n_last_matches: int) -> None:
        """Queue the target features of the tokens it just accepted (all the prompt after prefill)."""
        if model_outputs is None or getattr(model_outputs, "hidden_states", None) is None:
            raise ValueError("the target's forward returned no hidden states; DFlash needs them")
        if self.state is None:
            prompt_length = input_ids.shape[1] - 1
            kept = prompt_length
            self.state = DecodeState.after_prefill(model_outputs.logits[0, -1].float(), prompt_length)
            self.plan = self.make_plan(self.state)
        else:
            kept = n_last_matches + 1
        hidden = model_outputs.hidden_states
        self.pending.append(torch.cat([hidden[i + 1][:, :kept] for i in self.target_layer_ids], dim=-1)
                            .to(self.device))

    def _draft(self, input_ids: torch.Tensor, model_kwargs: dict[str, Any], start: int,
               size: int) -> torch.Tensor:
        """One drafter pass over [anchor, mask * (B - 1)]; the drafts' logits [1, B - 1, V]."""
        if self.drafted:
            self.cache.crop(-self.drafted)  # the previous block's own keys/values never persist
        context = torch.cat(self.pending, dim=1)
        self.pending, self.drafted = [], size
        self.cache.set_previous_accepted_tokens(context.shape[1])
        noise_ids = torch.full((1, size), self.mask_token_id, dtype=input_ids.dtype, device=input_ids.device)
        noise_ids[:, 0] = input_ids[:, -1]
        embed = getattr(self, "_get_noise_embeds", self.main_model_input_embeddings)
        positions = torch.arange(start - context.shape[1], start + size, device=self.device).unsqueeze(0)
        mask = model_kwargs.get("attention_mask")
        if mask is not None:
            mask = torch.cat([mask[:, :-1], mask.new_ones(1, size)], dim=-1).to(self.device)
        dtype = self.assistant_model.dtype  # the drafter runs in its own dtype, whatever the target's
        outputs = self.assistant_model(
            noise_embeds=embed(noise_ids).to(self.device, dtype), context_hidden_states=context.to(dtype),
            position_ids=positions, attention_mask=mask,
                                       **{cache_kwarg(type(self.assistant_model)): self.cache},
        )
        head = self.main_model_output_embeddings
        return head(outputs.last_hidden_state[:, 1:].to(head.weight.device,
                                                        head.weight.dtype)).to(input_ids.device)

    def _pick(self, input_ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """The candidates transformers' own generator would pick: argmax, or samples after the processors."""
        if not self.logits_processor and not self.do_sample:
            return torch.cat([input_ids, logits.argmax(dim=-1)], dim=-1)
        ids = input_ids
        for i in range(logits.shape[1]):
            if self.logits_processor:
                logits[:, i] = self.logits_processor(ids, logits[:, i].float())
            if self.do_sample:
                token = torch.multinomial(logits[:, i].float().softmax(dim=-1), num_samples=1)
            else:
                token = logits[:, i].argmax(dim=-1, keepdim=True)
            ids = torch.cat([ids, token], dim=-1)
        return ids

    def update_candidate_strategy(self, input_ids: torch.LongTensor, scores: torch.Tensor,
                                  num_matches: int) -> None:
        """Record the cycle: drafts that matched the target (``scores`` [1, B, V]) and tokens committed."""
        if self.state is None:  # the prefill step, not a cycle
            return
        accepted = int(num_matches)
        if not self.do_sample and self.candidates.numel():
            matches = (self.candidates.to(scores.device) == scores[0, :-1].argmax(dim=-1)).int()
            accepted = int(matches.cumprod(dim=0).sum())
        cycle = CycleRecord(self.size, accepted, int(num_matches) + 1,
                            verified=self.length if self.length < self.size else 0)
        self.cycles.append(cycle)
        self.state.advance(cycle, input_ids.shape[1] - self.state.prompt_length)


def install(model: PreTrainedModel, plans: PlanFactory,
            on_generator: Callable[[PolicyCandidateGenerator], None],
            max_positions: int | None = None) -> Callable[[], None]:
    """Make ``model.generate(..., speculation_type="dflash")`` use :class:`PolicyCandidateGenerator` (other
    modes keep transformers' own); returns the function that undoes it."""
    if getattr(model.__dict__.get("_get_candidate_generator"), "specpolicy", False):
        raise ValueError("a specpolicy policy is already attached to this model; detach it first (leave "
                         "its `with hf.attach(...)` block or call .detach()), then attach the next one")
    original = model._get_candidate_generator

    def candidate_generator(**kwargs: Any) -> Any:
        config, assistant = kwargs["generation_config"], kwargs.get("assistant_model")
        if getattr(config, "speculation_type", None) != "dflash" or assistant is None:
            return original(**kwargs)
        generator = PolicyCandidateGenerator(
            assistant_model=assistant, main_model_input_embeddings=model.get_input_embeddings(),
            main_model_output_embeddings=model.get_output_embeddings(), generation_config=config,
            logits_processor=kwargs.get("logits_processor"), plans=plans, max_positions=max_positions,
        )
        on_generator(generator)
        return generator

    candidate_generator.specpolicy = True  # marks our attachment, so a second one is refused
    model._get_candidate_generator = candidate_generator

    def uninstall() -> None:
        if model.__dict__.get("_get_candidate_generator") is candidate_generator:
            del model._get_candidate_generator

    return uninstall
