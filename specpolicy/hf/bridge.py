"""Checkpoint bridges between the z-lab DFlash drafter and transformers' ``MuseGlimmerAssistantModel`` (the
same layer math, renamed); what has no counterpart (attention biases, short sliding windows) is refused."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import Qwen3Config

from specpolicy.hf.compat import require_dflash_support
from specpolicy.models.dflash import DFlashDrafter, cast_keeping_rotary
from specpolicy.models.dflash_config import infer_target_layers

if TYPE_CHECKING:
    from transformers import PreTrainedModel

RENAMES = {"fc.weight": "encoder.fc.weight", "hidden_norm.weight": "encoder.output_norm_enc.weight"}
"""specpolicy key -> transformers key; every other key is the same on both sides."""
SHARED_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "head_dim", "rms_norm_eps", "max_position_embeddings", "hidden_act",
                 "attention_dropout")


def _rope_parameters(config: object) -> dict:
    rope = getattr(config, "rope_parameters", None)
    if rope:
        return dict(rope)
    return {"rope_type": "default", "rope_theta": float(getattr(config, "rope_theta", 10000.0))}


def assistant_config(drafter: DFlashDrafter):
    """The ``MuseGlimmerAssistantConfig`` of ``drafter``; a ValueError for what has no counterpart."""
    require_dflash_support()
    from transformers import MuseGlimmerAssistantConfig

    config = drafter.config
    if getattr(config, "attention_bias", False):
        raise ValueError("this drafter's attention projections have biases; transformers' DFlash assistant "
                         "has none, so it cannot be converted")
    if getattr(config, "use_sliding_window", False):
        raise ValueError("this drafter uses a sliding window; specpolicy converts full-attention drafters "
                         "only")
    fields = {name: getattr(config, name) for name in SHARED_FIELDS}
    fields["head_dim"] = fields["head_dim"] or config.hidden_size // config.num_attention_heads
    return MuseGlimmerAssistantConfig(
        **fields,
        rope_parameters=_rope_parameters(config),
        sliding_window=int(config.max_position_embeddings),
        layer_types=["full_attention"] * int(config.num_hidden_layers),
        block_size=drafter.block_size,
        mask_token_id=drafter.mask_token_id,
        target_layer_ids=list(drafter.target_layer_ids),
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def to_transformers_assistant(drafter: DFlashDrafter | str | Path) -> PreTrainedModel:
    """A z-lab DFlash drafter (object or folder) as transformers' ``MuseGlimmerAssistantModel``."""
    require_dflash_support()
    from transformers import MuseGlimmerAssistantModel

    if not isinstance(drafter, DFlashDrafter):
        drafter = DFlashDrafter.from_pretrained(drafter)
    reference = next(drafter.parameters())
    assistant = MuseGlimmerAssistantModel(assistant_config(drafter))
    state = {RENAMES.get(key, key): value for key, value in drafter.state_dict().items()
             if not key.startswith("rotary_emb.")}
    _load_exactly(assistant, state, "the specpolicy drafter")
    return cast_keeping_rotary(assistant, reference.device, reference.dtype)


def check_assistant(assistant: object) -> Any:
    """The config of ``assistant`` if it is transformers' DFlash assistant; a ValueError naming what it is."""
    config = getattr(assistant, "config", None)
    if getattr(config, "model_type", "") != "muse_glimmer_assistant":
        kind = getattr(config, "model_type", type(assistant).__name__)
        raise ValueError(f"the assistant is not a DFlash drafter (model_type {kind!r}, not "
                         "'muse_glimmer_assistant'); pass a DFlash drafter: transformers' assistant, a z-lab "
                         "checkpoint or a specpolicy drafter")
    return config


def from_transformers_assistant(assistant: PreTrainedModel | str | Path, num_target_layers: int | None = None
                                ) -> DFlashDrafter:
    """transformers' DFlash assistant (model or folder) as a specpolicy drafter; ``num_target_layers``
    default: the depth whose default layer choice gives the assistant's ``target_layer_ids`` (else asked)."""
    require_dflash_support()
    if isinstance(assistant, (str, Path)):
        from transformers import MuseGlimmerAssistantModel

        assistant = MuseGlimmerAssistantModel.from_pretrained(str(assistant))
    config = check_assistant(assistant)
    windowed = [i for i, kind in enumerate(config.layer_types) if kind != "full_attention"]
    if windowed and config.sliding_window < config.max_position_embeddings:
        raise ValueError(f"assistant layers {windowed} attend through a sliding window of "
                         f"{config.sliding_window} tokens, shorter than its context "
                         f"({config.max_position_embeddings}); specpolicy's drafter attends to the whole "
                         "context, so the two would draft differently")
    qwen = Qwen3Config(
        **{name: getattr(config, name) for name in SHARED_FIELDS},
        rope_parameters=_rope_parameters(config),
        attention_bias=False,
        layer_types=["full_attention"] * int(config.num_hidden_layers),
    )
    qwen.block_size = int(config.block_size)
    qwen.num_target_layers = int(num_target_layers or infer_target_layers(config.target_layer_ids,
                                                                          int(config.num_hidden_layers)))
    qwen.dflash_config = {"mask_token_id": int(config.mask_token_id),
                          "target_layer_ids": [int(i) for i in config.target_layer_ids]}
    reference = next(assistant.parameters())
    drafter = DFlashDrafter(qwen)
    inverse = {value: key for key, value in RENAMES.items()}
    state = {inverse.get(key, key): value for key, value in assistant.state_dict().items()
             if "rotary_emb" not in key}
    _load_exactly(drafter, state, "the transformers assistant")
    return cast_keeping_rotary(drafter, reference.device, reference.dtype)


def _load_exactly(module: torch.nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Load ``state`` into ``module``; a ValueError naming the keys and shapes that do not map."""
    expected = {key: value.shape for key, value in module.state_dict().items()
                if "rotary_emb" not in key or key in state}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(key for key in set(expected) & set(state)
                   if tuple(expected[key]) != tuple(state[key].shape))
    if missing or unexpected or wrong:
        raise ValueError(f"{source}'s weights do not map onto {type(module).__name__}: missing "
                         f"{missing[:6]}, unexpected {unexpected[:6]}, shapes differ at {wrong[:6]}")
    module.load_state_dict(state, strict=False)
