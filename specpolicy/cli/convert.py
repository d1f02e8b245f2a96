"""``specpolicy convert SOURCE OUT``: a DFlash drafter checkpoint in the other layout (z-lab, HF)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specpolicy.cli.common import fail, stderr
from specpolicy.files import atomic_path


def _model_type(folder: Path) -> str:
    config = folder / "config.json"
    if not config.is_file():
        raise fail(f"{folder} has no config.json; SOURCE must be a drafter checkpoint folder")
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise fail(f"{config} is not readable JSON ({error})") from None
    if raw.get("model_type") == "muse_glimmer_assistant":
        return "transformers"
    if "dflash_config" in raw:
        return "dflash"
    raise fail(f"{folder} is neither a z-lab DFlash drafter (no dflash_config) nor a transformers DFlash "
               "assistant (model_type muse_glimmer_assistant)")


def convert(
    source: Path = typer.Argument(..., help="a drafter folder: z-lab DFlash layout or transformers DFlash "
                                            "assistant"),
    out: Path = typer.Argument(..., help="folder to write the other layout into (must not exist)"),
    num_target_layers: int = typer.Option(None, min=1, help="the target's depth, recorded in a z-lab config "
                                          "(default: inferred from the assistant's target_layer_ids, refused "
                                          "when they do not fix it)"),
) -> None:
    """Convert a DFlash drafter between the z-lab layout (specpolicy, vLLM, SGLang) and transformers'
    DFlash assistant (generate(..., speculation_type="dflash")); the direction follows SOURCE."""
    from specpolicy.hf import from_transformers_assistant, require_dflash_support, to_transformers_assistant

    require_dflash_support()
    if out.exists():
        raise fail(f"{out} exists; pass a new folder so nothing is overwritten")
    kind = _model_type(source)
    converted = to_transformers_assistant(source) if kind == "dflash" else \
        from_transformers_assistant(source, num_target_layers)
    with atomic_path(out, folder="config.json") as folder:  # a failed write leaves nothing to block the retry
        converted.save_pretrained(folder)
    if kind == "dflash":
        stderr.print(f"wrote transformers DFlash assistant to {out} (load it with MuseGlimmerAssistantModel)")
    else:
        stderr.print(f"wrote z-lab DFlash drafter to {out} (use it as --drafter {out})")
