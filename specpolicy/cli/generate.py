"""``specpolicy generate "PROMPT"``: decode one prompt and report what the decoder did."""

from __future__ import annotations

import typer

from specpolicy.cli.common import (
    DeviceOption,
    DrafterOption,
    DraftSamplingOption,
    DtypeOption,
    SeedOption,
    TargetOption,
    TemperatureOption,
    ThreadsOption,
    check_draft_sampling,
    fail,
    stderr,
    stdout,
)
from specpolicy.defaults import DEFAULT_POLICY, GENERATE_MAX_NEW_TOKENS, MAX_BLOCK_SIZE


def generate(
    prompt: str = typer.Argument(..., help="the user message"),
    target: str = TargetOption,
    drafter: str = DrafterOption,
    policy: str = typer.Option(DEFAULT_POLICY, help="block-size policy (ignored when --block-size is given)"),
    block_size: int = typer.Option(None, "--block-size", "-b", min=1, max=MAX_BLOCK_SIZE,
                                   help="fixed block size B (1 = autoregressive)"),
    max_new_tokens: int = typer.Option(GENERATE_MAX_NEW_TOKENS, min=1),
    temperature: float = TemperatureOption,
    draft_sampling: bool = DraftSamplingOption,
    seed: int = SeedOption,
    threads: int = ThreadsOption,
    device: str = DeviceOption,
    dtype: str = DtypeOption,
) -> None:
    """Decode one prompt with a policy's block sizes (default: BlockPilot's start with a cost-aware guard);
    print the text, then the block sizes, tau and tokens/s on stderr."""
    from specpolicy.data.prompts import Prompt, encode_prompt
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.decoding.engine import check_live, decode
    from specpolicy.models import load_pair
    from specpolicy.models.sources import target_vocab_size
    from specpolicy.policy import check_vocabulary
    from specpolicy.registry import get_registry
    from specpolicy.sweep.latency import cached_costs, pin_threads

    if not prompt.strip():
        raise fail("empty prompt: pass the text to decode, e.g. specpolicy generate \"Hello\"")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise fail("the prompt is not valid UTF-8 text (check the terminal's encoding); pass "
                   "UTF-8 text") from None
    check_draft_sampling(draft_sampling, temperature)
    chosen = None if block_size is not None else get_registry().create(policy)
    if chosen is not None:
        check_live([chosen])
    if chosen is not None:
        check_vocabulary([chosen], target_vocab_size(target), f"target {target!r}")
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    ids = encode_prompt(pair.tokenizer, Prompt.single("cli", prompt))
    decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=temperature,
                                 max_new_tokens=max_new_tokens, draft_sampling=draft_sampling)
    costs = cached_costs(decoder, chosen.candidates, pair.metadata(),
                         stderr.print) if chosen is not None else None
    try:
        if chosen is None:
            trace = decoder.generate(ids, block_size, seed=seed)
        else:
            trace = decode(decoder, ids, chosen, prompt_id="cli", costs=costs, seed=seed)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    stdout.print(pair.tokenizer.decode(trace.output_ids, skip_special_tokens=True), markup=False,
                 highlight=False,
                 # the text as decoded: no line breaks of the console's width in a file or pipe
                 soft_wrap=True)
    sizes = sorted({c.block_size for c in trace.cycles})
    label = f"block size {sizes[0]}" if len(sizes) == 1 else f"block sizes {sizes}"
    source = "fixed" if chosen is None else chosen.name
    stderr.print(
        f"{label} ({source}) | tau {trace.tau:.2f} | {trace.tokens_per_second:.1f} tokens/s | "
        f"{len(trace.output_ids)} tokens, stop: {trace.stop_reason}", soft_wrap=True
    )
