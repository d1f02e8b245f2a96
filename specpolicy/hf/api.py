"""Run a specpolicy policy inside ``model.generate(..., speculation_type="dflash")``: :func:`generate`, or
:func:`attach` to your own calls (docs/tutorials/hf-generate.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specpolicy.arguments import check_block_size, is_integer
from specpolicy.checks import check_vocabulary
from specpolicy.costs import CostTable
from specpolicy.cycles import CycleRecord, Plan
from specpolicy.decoding.decoder import max_positions
from specpolicy.hf.bridge import check_assistant, to_transformers_assistant
from specpolicy.hf.compat import require_dflash_support
from specpolicy.models.dflash import DFlashDrafter
from specpolicy.policy import Policy
from specpolicy.state import DecodeState, mean_acceptance

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from specpolicy.hf.generator import PolicyCandidateGenerator

PolicyLike = Policy | str | int
"""A policy object, a registered name (``"fixed16"``, ``"blockpilot-guard"``) or a fixed block size."""


def resolve_policy(policy: PolicyLike, candidates: Sequence[int] | None = None) -> Policy | int:
    """A policy object or a fixed block size; a ValueError for oracles, which cannot decode live."""
    if isinstance(policy, str):
        from specpolicy.registry import get_registry

        registry = get_registry()
        policy = registry.create(policy, candidates) if candidates is not None else registry.create(policy)
    if not isinstance(policy, Policy):
        if not is_integer(policy):
            raise ValueError("policy must be a policy name, a Policy or a block size, such as "
                             f"'blockpilot-guard' or 16; got {policy!r}")
        return check_block_size(policy)
    from specpolicy.decoding.engine import check_live

    check_live([policy])
    return policy


def _planner(policy: Policy | int, costs: CostTable | None, prompt_id: str) -> Callable[[DecodeState], Plan]:
    """The state after prefill -> the policy's plan for the prompt (a fixed size: :meth:`Plan.fixed`)."""
    if isinstance(policy, int):
        return lambda state: Plan.fixed(policy)
    from specpolicy.decoding.engine import observe

    return lambda state: policy.checked_plan(observe(state, prompt_id, costs))


class Attachment:
    """A policy attached to a transformers model's DFlash ``generate()`` (``cycles``: the latest call's);
    :meth:`detach` or leaving the ``with`` block restores transformers' generator."""

    def __init__(self, model: PreTrainedModel, policy: PolicyLike, *,
                 costs: CostTable | str | Path | None = None,
                 candidates: Sequence[int] | None = None, prompt_id: str = "hf") -> None:
        require_dflash_support()
        from specpolicy.hf.generator import install

        self.policy = resolve_policy(policy, candidates)
        if isinstance(self.policy, Policy):
            check_vocabulary([self.policy], model.get_output_embeddings().out_features, "this model")
        if not isinstance(costs, CostTable | str | Path | None):
            raise ValueError(f"costs must be a CostTable or its file (from `specpolicy bench latency --out "
                             f"FILE`), got {costs!r}")
        self.costs = CostTable.load(costs) if isinstance(costs, (str, Path)) else costs
        self.generator: PolicyCandidateGenerator | None = None
        self._uninstall = install(model, _planner(self.policy, self.costs, prompt_id), self._bind,
                                  max_positions(model))

    def _bind(self, generator: PolicyCandidateGenerator) -> None:
        self.generator = generator

    @property
    def cycles(self) -> list[CycleRecord]:
        return list(self.generator.cycles) if self.generator is not None else []

    def detach(self) -> None:
        self._uninstall()

    def __enter__(self) -> Attachment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()


def attach(model: PreTrainedModel, policy: PolicyLike, *, costs: CostTable | str | Path | None = None,
           candidates: Sequence[int] | None = None, prompt_id: str = "hf") -> Attachment:
    """Make ``model.generate(..., speculation_type="dflash")`` pick B with ``policy``; ``costs``: a
    :class:`~specpolicy.costs.CostTable` or its file; ``prompt_id``: the observation's name (``"hf"``)."""
    return Attachment(model, policy, costs=costs, candidates=candidates, prompt_id=prompt_id)


@dataclass
class HFGeneration:
    """What :func:`generate` returns: ``generate()``'s own output and the cycles the policy ran."""

    output: Any
    cycles: list[CycleRecord] = field(default_factory=list)

    @property
    def sequences(self) -> Any:
        """Token ids [1, prompt + new] (``output`` itself, or its ``.sequences``)."""
        return getattr(self.output, "sequences", self.output)

    @property
    def block_sizes(self) -> list[int]:
        return [c.block_size for c in self.cycles]

    @property
    def tau(self) -> float:
        return mean_acceptance(self.cycles)


def as_assistant(drafter: PreTrainedModel | DFlashDrafter | str | Path) -> PreTrainedModel:
    """transformers' DFlash assistant for ``drafter``: itself, or a specpolicy drafter converted."""
    if isinstance(drafter, (DFlashDrafter, str, Path)):
        return to_transformers_assistant(drafter)
    return drafter


def check_pair(model: PreTrainedModel, assistant: PreTrainedModel) -> None:
    """Refuse, naming the mismatch, a DFlash assistant made for another target (it reads the target's
    layers ``target_layer_ids`` of width ``hidden_size`` and drafts with the target's vocabulary)."""
    target, drafted = model.config.get_text_config(), check_assistant(assistant)
    layers = [int(i) for i in getattr(drafted, "target_layer_ids", None) or []]
    problems = []
    if layers and max(layers) >= target.num_hidden_layers:
        problems.append(f"it reads target layers {layers}, but this model has {target.num_hidden_layers} "
                        "layers")
    if getattr(drafted, "hidden_size", target.hidden_size) != target.hidden_size:
        problems.append(f"its hidden size is {drafted.hidden_size}, this model's {target.hidden_size}")
    mask = getattr(drafted, "mask_token_id", None)
    if mask is not None and mask >= target.vocab_size:
        problems.append(f"its mask token {mask} lies outside this model's vocabulary of {target.vocab_size}")
    if problems:
        raise ValueError(f"the DFlash drafter was made for another target: {'; '.join(problems)}; pass the "
                         "drafter trained for this model")


def generate(model: PreTrainedModel, drafter: PreTrainedModel | DFlashDrafter | str | Path,
             policy: PolicyLike = "blockpilot-guard", *, costs: CostTable | str | Path | None = None,
             candidates: Sequence[int] | None = None, prompt_id: str = "hf",
             **generate_kwargs: Any) -> HFGeneration:
    """``model.generate(**generate_kwargs, assistant_model=drafter, speculation_type="dflash")`` with every
    cycle's B chosen by ``policy`` (a z-lab ``drafter`` converted per call); the rest as :func:`attach`."""
    assistant = as_assistant(drafter)
    check_pair(model, assistant)
    with attach(model, policy, costs=costs, candidates=candidates, prompt_id=prompt_id) as run:
        output = model.generate(**generate_kwargs, assistant_model=assistant, speculation_type="dflash")
        return HFGeneration(output, run.cycles)
