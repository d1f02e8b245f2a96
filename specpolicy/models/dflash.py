"""The DFlash block-diffusion drafter, weight-compatible with the z-lab checkpoints: Qwen3-style layers that
read the target's projected features through their k/v and attend to the block bidirectionally."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm, Qwen3RotaryEmbedding, rotate_half

from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.models.dflash_config import default_target_layer_ids, legacy_rope_fields

WEIGHTS_NAME = "model.safetensors"
DFLASH_KEYS = ("block_size", "num_target_layers", "dflash_config")
CONFIG_NAME = "config.json"


def cast_keeping_rotary(module: nn.Module, device: str | torch.device, dtype: torch.dtype) -> nn.Module:
    """``module`` moved to ``device``/``dtype`` in eval mode, its RoPE frequency buffers kept float32."""
    rotary = {name: buffer.clone() for name, buffer in module.named_buffers() if "rotary_emb" in name}
    module = module.to(device=device, dtype=dtype).eval()
    for name, buffer in rotary.items():
        owner, _, attribute = name.rpartition(".")
        setattr(module.get_submodule(owner), attribute, buffer.to(device))
    return module


class DrafterCache:
    """Per-layer key/value tensors of the drafter's context, shape [batch, kv_heads, length, head_dim]."""

    def __init__(self, num_layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers

    def __len__(self) -> int:
        return 0 if self.keys[0] is None else self.keys[0].shape[-2]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``k``/``v`` to layer ``layer`` and return the full keys/values."""
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=-2)
            v = torch.cat([self.values[layer], v], dim=-2)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions."""
        for i, (k, v) in enumerate(zip(self.keys, self.values)):
            if k is not None:
                self.keys[i], self.values[i] = k[..., :length, :], v[..., :length, :]


class DFlashAttention(nn.Module):
    """Attention whose queries come from the block and keys/values from context + block."""

    def __init__(self, config: Qwen3Config, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        bias = bool(getattr(config, "attention_bias", False))
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=bias)
        self.q_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def keys_values(self, x: torch.Tensor, cos: torch.Tensor,
                    sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotated keys and values of ``x`` [b, s, H] at cos/sin [b, s, d]: each [b, kv_heads, s, d]."""
        b, s, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, s, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return k * cos + rotate_half(k) * sin, v

    def forward(
        self,
        block: torch.Tensor,
        context: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: DrafterCache | None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """block [b, n, H] (normed), context [b, c, H], cos/sin [b, c + n, head_dim]; ``attention_mask`` bool
        [b or 1, 1, n, keys] (training only). Returns [b, n, H]."""
        b, n, _ = block.shape
        q = self.q_norm(self.q_proj(block).view(b, n, self.num_heads, self.head_dim)).transpose(1, 2)
        k, v = self.keys_values(torch.cat([context, block], dim=1), cos, sin)
        q = q * cos.unsqueeze(1)[..., -n:, :] + rotate_half(q) * sin.unsqueeze(1)[..., -n:, :]
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)
        if self.num_kv_heads != self.num_heads:
            repeat = self.num_heads // self.num_kv_heads
            k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, is_causal=False)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1))


class DFlashDecoderLayer(nn.Module):
    """Pre-norm Qwen3 layer; the context skips ``input_layernorm`` and enters through k/v only."""

    def __init__(self, config: Qwen3Config, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = DFlashAttention(config, layer_idx)
        self.mlp = Qwen3MLP(config)
        self.input_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden, context, cos, sin, cache, attention_mask=None) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), context, cos, sin, cache,
                                         attention_mask)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


def _drafter_config(config_file: Path) -> Qwen3Config:
    """A DFlash drafter's config; a ValueError naming the file when it is not one (e.g. a target's)."""
    try:
        raw = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{config_file} is not readable JSON ({error})") from None
    missing = [k for k in DFLASH_KEYS if k not in raw]
    if missing:
        raise ValueError(f"{config_file.parent} is not a DFlash drafter (its config.json lacks "
                         f"{', '.join(missing)}); --drafter must name a drafter folder (a target folder "
                         "goes to --target)")
    try:
        return Qwen3Config.from_dict(raw)
    except Exception as error:  # transformers validates configs with its own error types
        raise ValueError(f"{config_file} is not a valid drafter config: {error}") from None


class DFlashDrafter(nn.Module):
    """DFlash drafter: a Qwen3 ``config`` plus ``block_size``, ``num_target_layers`` and ``dflash_config``
    (``mask_token_id``, ``target_layer_ids``)."""

    def __init__(self, config: Qwen3Config) -> None:
        super().__init__()
        dflash = dict(getattr(config, "dflash_config", None) or {})
        if "target_layer_ids" not in dflash:
            dflash["target_layer_ids"] = default_target_layer_ids(
                int(config.num_target_layers), int(config.num_hidden_layers)
            )
        if "mask_token_id" not in dflash:
            raise ValueError("drafter config lacks dflash_config.mask_token_id; add the target's mask "
                             "token id")
        config.dflash_config = dflash
        self.config = config
        self.target_layer_ids: list[int] = [int(i) for i in dflash["target_layer_ids"]]
        self.mask_token_id: int = int(dflash["mask_token_id"])
        self.block_size: int = int(getattr(config, "block_size", TRAINING_BLOCK_SIZE))
        self.layers = nn.ModuleList(DFlashDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen3RotaryEmbedding(config)
        self.fc = nn.Linear(len(self.target_layer_ids) * config.hidden_size, config.hidden_size, bias=False)
        self.hidden_norm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    @property
    def hidden_size(self) -> int:
        return int(self.config.hidden_size)

    def new_cache(self) -> DrafterCache:
        """An empty context cache for one decode."""
        return DrafterCache(len(self.layers))

    def context_features(self, hidden_states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The target layers read, concatenated: ``hidden_states`` [b, s, H] -> [b, s, len(ids) * H]."""
        return torch.cat([hidden_states[i + 1] for i in self.target_layer_ids], dim=-1)

    def forward(
        self,
        block_embeddings: torch.Tensor,
        context_features: torch.Tensor,
        position_ids: torch.Tensor,
        cache: DrafterCache | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Denoise one block in one pass -> its hidden states [b, n, H]: ``block_embeddings`` [b, n, H],
        ``context_features`` [b, c, L*H] not yet in ``cache`` (extended: crop it after), ``position_ids`` [b,
        c + n], ``attention_mask`` bool [b or 1, 1, n, cache + c + n] (training only)."""
        context = self.hidden_norm(self.fc(context_features))
        cos, sin = self.rotary_emb(block_embeddings, position_ids)
        hidden = block_embeddings
        for layer in self.layers:
            hidden = layer(hidden, context, cos, sin, cache, attention_mask)
        return self.norm(hidden)

    def cache_context(self, context_features: torch.Tensor, position_ids: torch.Tensor,
                      cache: DrafterCache) -> None:
        """Append context keys/values to ``cache``, no draft: ``context_features`` [b, c, L*H] at
        ``position_ids`` [b, c]."""
        context = self.hidden_norm(self.fc(context_features))
        cos, sin = self.rotary_emb(context, position_ids)
        for layer in self.layers:
            attention = layer.self_attn
            cache.update(attention.layer_idx, *attention.keys_values(context, cos, sin))

    # --- checkpoint format -------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls, path: str | Path, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"
    ) -> DFlashDrafter:
        """Load a DFlash checkpoint folder (``config.json`` + safetensors) without remote code."""
        folder = Path(path)
        config_file = folder / CONFIG_NAME
        if not config_file.exists():
            raise FileNotFoundError(f"no {CONFIG_NAME} in drafter folder {folder}")
        drafter = cls(_drafter_config(config_file))
        state: dict[str, torch.Tensor] = {}
        files = sorted(folder.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no .safetensors weights in drafter folder {folder}")
        for file in files:
            try:
                state.update(load_file(str(file)))
            except Exception as error:  # safetensors raises its own SafetensorError
                raise ValueError(f"the weights file {file} is damaged or truncated ({error}); download or "
                                 "rebuild the drafter") from error
        expected = set(drafter.state_dict().keys())
        missing, unexpected = expected - set(state), set(state) - expected
        if missing or unexpected:
            raise ValueError(
                f"drafter weights in {folder} do not match the DFlash layout: "
                f"missing {sorted(missing)[:8]}, unexpected {sorted(unexpected)[:8]}"
            )
        try:
            drafter.load_state_dict(state)
        except RuntimeError as error:
            raise ValueError(f"drafter weights in {folder} do not fit its config.json (shapes differ): "
                             f"{str(error).splitlines()[-1].strip()}") from error
        return cast_keeping_rotary(drafter, device, dtype)

    def save_pretrained(self, path: str | Path, dtype: torch.dtype | None = None) -> None:
        """Write ``config.json`` and ``model.safetensors`` in the published DFlash layout."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        config = self.config.to_dict()
        config["architectures"] = ["DFlashDraftModel"]
        config.pop("auto_map", None)
        config.update(legacy_rope_fields(config.get("rope_parameters")))
        (folder / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True))
        state = {k: v.detach().to(dtype or v.dtype).contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
