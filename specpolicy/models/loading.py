"""Load a target and its DFlash drafter from the zoo, a local folder, or a hub id."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from specpolicy.models.dflash import DFlashDrafter
from specpolicy.models.sources import resolve_source, weights_fingerprint

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


def resolve_dtype(dtype: str | torch.dtype, device: str | torch.device) -> torch.dtype:
    """``"auto"`` means bfloat16 on CUDA and float32 elsewhere."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of auto, {', '.join(DTYPES)}")
    return DTYPES[dtype]


def resolve_device(device: str) -> str:
    """``"auto"`` means CUDA when available, else CPU; an unavailable CUDA request fails clearly."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except RuntimeError:
        raise ValueError(f"unknown device {device!r}; use cpu, cuda, cuda:N or auto") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available; use --device cpu")
    return device


def attention_implementation(device: str) -> str:
    """flash_attention_2 on CUDA when installed, else sdpa."""
    if torch.device(device).type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def load_target(
    name: str = "tiny", dtype: str | torch.dtype = "auto", device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Any Hugging Face causal LM and its tokenizer, in eval mode."""
    device = resolve_device(device)
    source = resolve_source(name, "target")
    torch_dtype = resolve_dtype(dtype, device)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=torch_dtype, attn_implementation=attention_implementation(device)
        )
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OSError as error:  # transformers' "not found / cannot connect" errors
        raise ValueError(f"cannot load target {name!r}: not the zoo's 'tiny', not a local folder, "
                         "and not a hub model this machine can reach or has cached "
                         f"({str(error).splitlines()[0][:160]})") from None
    return model.to(device).eval(), tokenizer


def _drafter_folder(source: str) -> Path:
    if Path(source).exists():
        return Path(source)
    from huggingface_hub import snapshot_download  # online users only

    return Path(snapshot_download(source, allow_patterns=["*.json", "*.safetensors"]))


def check_compatible(drafter: DFlashDrafter, target: PreTrainedModel) -> None:
    """Fail with a message naming both sides when ``drafter`` cannot draft for ``target``."""
    t_config = target.config.get_text_config() if hasattr(target.config, "get_text_config") else target.config
    problems = []
    if drafter.hidden_size != t_config.hidden_size:
        problems.append(f"hidden size: drafter {drafter.hidden_size} vs target {t_config.hidden_size}")
    vocab = target.get_input_embeddings().num_embeddings
    if not 0 <= drafter.mask_token_id < vocab:
        problems.append(f"mask token id: drafter {drafter.mask_token_id} vs target embedding rows {vocab}")
    depth = t_config.num_hidden_layers
    beyond = [i for i in drafter.target_layer_ids if not 0 <= i < depth]
    if beyond:
        problems.append(f"target layer ids: drafter reads {drafter.target_layer_ids}, target has {depth} "
                        f"layers (0..{depth - 1}); {beyond} out of range")
    if problems:
        raise ValueError("drafter does not fit the target: " + "; ".join(problems))


def load_drafter(
    name: str, target: PreTrainedModel, dtype: str | torch.dtype = "auto", device: str = "cpu"
) -> DFlashDrafter:
    """A DFlash drafter checked against ``target`` at load time."""
    device = resolve_device(device)
    folder = _drafter_folder(resolve_source(name, "drafter"))
    drafter = DFlashDrafter.from_pretrained(folder, dtype=resolve_dtype(dtype, device), device=device)
    check_compatible(drafter, target)
    return drafter


@dataclass
class ModelPair:
    """A target, its tokenizer and drafter, with the identifiers that go into every artifact."""

    target: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    drafter: DFlashDrafter
    target_id: str
    drafter_id: str
    dtype: str
    device: str
    extra: dict = field(default_factory=dict)
    target_fingerprint: str | None = None
    drafter_fingerprint: str | None = None

    def metadata(self) -> dict:
        """Identifiers of this pair for saved artifacts."""
        return {"target": self.target_id, "drafter": self.drafter_id, "dtype": self.dtype,
                "device": self.device, "target_revision": getattr(self.target.config, "_commit_hash", None),
                "target_fingerprint": self.target_fingerprint,
                "drafter_fingerprint": self.drafter_fingerprint}


def load_pair(target: str = "tiny", drafter: str = "tiny", dtype: str = "auto",
              device: str = "cpu") -> ModelPair:
    """Load a target and its drafter; ``tiny`` is the built-in zoo."""
    device = resolve_device(device)
    # a bad drafter is named before the target loads
    for name, kind in ((target, "target"), (drafter, "drafter")):
        resolve_source(name, kind)
    model, tokenizer = load_target(target, dtype, device)
    draft = load_drafter(drafter, model, dtype, device)
    return ModelPair(model, tokenizer, draft, target, drafter,
                     str(resolve_dtype(dtype, device)).replace("torch.", ""),
                     device, target_fingerprint=weights_fingerprint(target, "target"),
                     drafter_fingerprint=weights_fingerprint(drafter, "drafter"))
