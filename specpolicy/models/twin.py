"""The cost twin: the tiny pair's function in a much larger compute graph (docs/cost-twin.md). Added heads,
MLP units and target layers write through zero output projections, so every logit and drafted token is the
tiny pair's and only the work per forward grows; the drafter reads the same target layers."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specpolicy.defaults import TWIN_HEADS, TWIN_INTERMEDIATE, TWIN_LAYERS
from specpolicy.files import atomic_path, check_replaceable

MARKER = "twin.json"
"""the shape a twin folder was built with; marks it as ``build_twin``'s (an earlier one is replaced whole)"""
INIT_STD = 0.02
"""standard deviation of the added weights that are not zero (Qwen3's ``initializer_range``)"""


@dataclass(frozen=True)
class TwinShape:
    """The twin target's size; the tiny target is 6 layers, 4 heads (2 key-value), 768 MLP units."""

    layers: int = TWIN_LAYERS
    heads: int = TWIN_HEADS
    intermediate: int = TWIN_INTERMEDIATE
    seed: int = 0

    def check(self, config: dict) -> None:
        """Refuse a shape that cannot contain the tiny target ``config``."""
        heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
        problems = [f"{name} {value} < the tiny target's {base}" for name, value, base in (
            ("layers", self.layers, config["num_hidden_layers"]), ("heads", self.heads, heads),
            ("intermediate", self.intermediate, config["intermediate_size"])) if value < base]
        if self.heads % (heads // kv):
            problems.append(f"heads {self.heads} is not a multiple of {heads // kv} (query heads per "
                            "key-value head)")
        if problems:
            raise ValueError("cost twin: " + "; ".join(problems))


def _rows(weight: torch.Tensor, rows: int, generator: torch.Generator) -> torch.Tensor:
    """``weight`` [r, c] with random rows appended to ``rows`` [rows, c]."""
    extra = torch.randn(rows - weight.shape[0], weight.shape[1], generator=generator) * INIT_STD
    return torch.cat([weight, extra.to(weight.dtype)])


def _zero_columns(weight: torch.Tensor, columns: int) -> torch.Tensor:
    """``weight`` [r, c] with zero columns appended to ``columns`` [r, columns]."""
    return torch.cat([weight, weight.new_zeros(weight.shape[0], columns - weight.shape[1])], dim=1)


def _layer(state: dict, prefix: str, dims: dict, generator: torch.Generator) -> None:
    """Grow (or create, where ``prefix`` is new) a decoder layer in ``state`` to ``dims``, added columns 0."""
    hidden, head_dim, dtype = dims["hidden"], dims["head_dim"], dims["dtype"]
    empty = torch.zeros(0, hidden, dtype=dtype)
    attention, key_values, units = dims["heads"] * head_dim, dims["kv"] * head_dim, dims["intermediate"]
    for name, rows in (("self_attn.q_proj", attention), ("self_attn.k_proj", key_values),
                       ("self_attn.v_proj", key_values), ("mlp.gate_proj", units), ("mlp.up_proj", units)):
        weight = state.get(f"{prefix}{name}.weight", empty)
        state[f"{prefix}{name}.weight"] = _rows(weight, rows, generator)
    for name, columns in (("self_attn.o_proj", attention), ("mlp.down_proj", units)):
        weight = state.get(f"{prefix}{name}.weight", torch.zeros(hidden, 0, dtype=dtype))
        state[f"{prefix}{name}.weight"] = _zero_columns(weight, columns)
    for name, size in (("input_layernorm", hidden), ("post_attention_layernorm", hidden),
                       ("self_attn.q_norm", head_dim), ("self_attn.k_norm", head_dim)):
        state.setdefault(f"{prefix}{name}.weight", torch.ones(size, dtype=dtype))


def enlarge_target(state: dict, config: dict, shape: TwinShape) -> tuple[dict, dict]:
    """The twin target's (weights, config) from the tiny target's; weights keep their dtype."""
    shape.check(config)
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    dims = {"hidden": config["hidden_size"], "head_dim": head_dim, "heads": shape.heads,
            "kv": shape.heads * kv // heads, "intermediate": shape.intermediate,
            "dtype": state["model.embed_tokens.weight"].dtype}
    generator = torch.Generator().manual_seed(shape.seed)
    grown = dict(state)
    for index in range(shape.layers):
        _layer(grown, f"model.layers.{index}.", dims, generator)
    grown = {name: tensor.contiguous() for name, tensor in grown.items()}
    config = {**config, "num_hidden_layers": shape.layers, "num_attention_heads": shape.heads,
              "num_key_value_heads": dims["kv"], "intermediate_size": shape.intermediate,
              "layer_types": ["full_attention"] * shape.layers}
    return grown, config


def build_twin(tiny: Path, drafter: Path, out: Path, shape: TwinShape = TwinShape()) -> Path:
    """Write the twin pair into ``out``/target and ``out``/drafter (atomically; the tokenizer and the
    drafter's weights copied as they are); ``out`` must be new, empty or an earlier twin, and a shape that
    cannot hold the tiny target is refused, both before the weights grow. Returns ``out``."""
    check_replaceable(out, MARKER)  # atomic_path checks it again where it writes
    config = json.loads((tiny / "config.json").read_text(encoding="utf-8"))
    state, config = enlarge_target(load_file(tiny / "model.safetensors"), config, shape)
    drafter_config = json.loads((drafter / "config.json").read_text(encoding="utf-8"))
    drafter_config["num_target_layers"] = shape.layers  # its target_layer_ids name the same (first) layers
    with atomic_path(out, MARKER) as staged:
        target_dir, drafter_dir = staged / "target", staged / "drafter"
        shutil.copytree(tiny, target_dir, ignore=shutil.ignore_patterns("model.safetensors", "config.json"))
        save_file(state, target_dir / "model.safetensors", metadata={"format": "pt"})
        (target_dir / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        shutil.copytree(drafter, drafter_dir, ignore=shutil.ignore_patterns("config.json"))
        (drafter_dir / "config.json").write_text(json.dumps(drafter_config, indent=2), encoding="utf-8")
        (staged / MARKER).write_text(json.dumps(asdict(shape), indent=2), encoding="utf-8")
    return out
