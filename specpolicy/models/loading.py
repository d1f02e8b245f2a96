"""Load a target and its DFlash drafter from the zoo, a local folder, or a hub id."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from specpolicy.models.dflash import DFlashDrafter

ZOO_NAMES = ("tiny",)
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


def zoo_path(name: str, kind: str) -> Path:
    """Folder of a built-in zoo model (``kind`` is ``target`` or ``drafter``)."""
    from specpolicy.zoo import ZOO_DIR, finish_publish

    finish_publish(ZOO_DIR)  # an interrupted `python -m zoo_build publish` completes before the zoo is read
    folder = ZOO_DIR / kind if name == "tiny" else ZOO_DIR / name / kind
    if not (folder / "config.json").exists():
        raise FileNotFoundError(
            f"the built-in zoo {kind} {name!r} is missing from {folder}; reinstall specpolicy, or from a "
            "checkout rebuild it with `python -m zoo_build train` and `python -m zoo_build publish`"
        )
    return folder


def resolve_source(name: str, kind: str) -> str:
    """A zoo name, an existing local folder, or (for online users) a hub id, as a string."""
    if name in ZOO_NAMES:
        return str(zoo_path(name, kind))
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            what = "a file" if path.is_file() else "a folder without config.json"
            raise FileNotFoundError(f"{kind} {name!r} is {what}; pass a model folder (config.json and safetensors "
                                    f"weights), a zoo name ({', '.join(ZOO_NAMES)}) or a hub id owner/name")
        return str(path)
    if name.count("/") != 1 or name.startswith((".", "/")):
        raise FileNotFoundError(f"{kind} {name!r} is neither a zoo name ({', '.join(ZOO_NAMES)}), a local folder, "
                                "nor a hub id of the form owner/name")
    return name


def target_vocab_size(name: str) -> int | None:
    """The target's vocabulary (its logits width) from its config alone, before any weights load; ``None``
    when the config cannot be read without loading (the load reports why)."""
    try:
        source = resolve_source(name, "target")
        config = AutoConfig.from_pretrained(source)
    except Exception:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "vocab_size", None)


def weights_fingerprint(name: str, kind: str) -> str | None:
    """sha256 (16 hex digits) of a zoo or local model's safetensors files; None for a hub id.

    Sweeps and caches record it, so results of other weights under the same name are never reused.
    Hashed once per process for each set of files (keyed on their paths, sizes and modification times).
    """
    folder = Path(resolve_source(name, kind))
    if not folder.exists():
        return None  # hub id: its revision is recorded once loaded
    stats = [(path, path.stat()) for path in sorted(folder.glob("*.safetensors"))]
    files = tuple((str(path), stat.st_size, stat.st_mtime_ns) for path, stat in stats)
    return _hash_files(files)


@functools.lru_cache(maxsize=64)
def _hash_files(files: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for path, _, _ in files:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


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
        raise ValueError(f"cannot load target {name!r}: not the zoo's 'tiny', not a local folder, and not a hub "
                         f"model this machine can reach or has cached ({str(error).splitlines()[0][:160]})") from None
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
        problems.append(f"target layer ids: drafter reads {drafter.target_layer_ids}, target has {depth} layers "
                        f"(0..{depth - 1}); {beyond} out of range")
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
        return {"target": self.target_id, "drafter": self.drafter_id, "dtype": self.dtype, "device": self.device,
                "target_revision": getattr(self.target.config, "_commit_hash", None),
                "target_fingerprint": self.target_fingerprint, "drafter_fingerprint": self.drafter_fingerprint}


def load_pair(target: str = "tiny", drafter: str = "tiny", dtype: str = "auto", device: str = "cpu") -> ModelPair:
    """Load a target and its drafter; ``tiny`` is the built-in zoo."""
    device = resolve_device(device)
    for name, kind in ((target, "target"), (drafter, "drafter")):  # a bad drafter is named before the target loads
        resolve_source(name, kind)
    model, tokenizer = load_target(target, dtype, device)
    draft = load_drafter(drafter, model, dtype, device)
    return ModelPair(model, tokenizer, draft, target, drafter, str(resolve_dtype(dtype, device)).replace("torch.", ""),
                     device, target_fingerprint=weights_fingerprint(target, "target"),
                     drafter_fingerprint=weights_fingerprint(drafter, "drafter"))
