"""``specpolicy generate "PROMPT"``: decode one prompt and report what the decoder did."""

from __future__ import annotations

import typer

from specpolicy.cli.common import DeviceOption, DrafterOption, DtypeOption, TargetOption, fail, stderr, stdout


def generate(
    prompt: str = typer.Argument(..., help="the user message"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    block_size: int = typer.Option(16, "--block-size", "-b", min=1, help="block size B (1 = autoregressive)"),
    max_new_tokens: int = typer.Option(256, min=1),
    temperature: float = typer.Option(0.0, min=0.0, help="0 = greedy"),
    seed: int = typer.Option(0, help="seed of the positional sampling uniforms (T > 0)"),
    device: str = DeviceOption,
    dtype: str = DtypeOption,
) -> None:
    """Decode one prompt; print the text, then the block size, tau and tokens/s on stderr."""
    from specpolicy.data.prompts import Prompt, encode_prompt
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair

    if not prompt.strip():
        raise fail("empty prompt: pass the text to decode, e.g. specpolicy generate \"Hello\"")
    try:
        pair = load_pair(target, drafter, dtype, device)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc)) from exc
    ids = encode_prompt(pair.tokenizer, Prompt.single("cli", prompt))
    decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=temperature, max_new_tokens=max_new_tokens)
    trace = decoder.generate(ids, block_size, seed=seed)
    stdout.print(pair.tokenizer.decode(trace.output_ids, skip_special_tokens=True), markup=False, highlight=False)
    stderr.print(
        f"block size {block_size} | tau {trace.tau:.2f} | {trace.tokens_per_second:.1f} tokens/s | "
        f"{len(trace.output_ids)} tokens, stop: {trace.stop_reason}"
    )
