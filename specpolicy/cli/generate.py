"""``specpolicy generate "PROMPT"``: decode one prompt and report what the decoder did."""

from __future__ import annotations

import typer

from specpolicy.cli.common import (
    DeviceOption,
    DrafterOption,
    DraftSamplingOption,
    DtypeOption,
    SeedOption,
    ServerOption,
    TargetOption,
    TemperatureOption,
    ThreadsOption,
    check_draft_sampling,
    fail,
    stderr,
    stdout,
)
from specpolicy.defaults import DEFAULT_CANDIDATES, DEFAULT_POLICY, GENERATE_MAX_NEW_TOKENS, MAX_BLOCK_SIZE


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
    costs: str = typer.Option(None, help="the cost table the policy plans with (default: this machine's, "
                                         "measured once; with --engine, the engine's: `specpolicy compare "
                                         "--engine llamacpp --steps DIR` saves it as DIR/costs.json)"),
    engine: str = typer.Option(None, help="decode in a serving engine, greedily: llamacpp (llama.cpp's "
                                          "llama-server, `specpolicy engine build`)"),
    server: str = ServerOption,
) -> None:
    """Decode one prompt with a policy's block sizes (default: BlockPilot's start with a cost-aware guard);
    print the text, then the block sizes, tau and tokens/s on stderr."""
    from specpolicy.arguments import check_engine
    from specpolicy.costs import CostTable
    from specpolicy.data.prompts import Prompt, encode_prompt
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.decoding.engine import decode
    from specpolicy.engines.build import find_server
    from specpolicy.models import load_pair
    from specpolicy.sweep.latency import cached_costs, pin_threads

    _check_prompt(prompt)
    check_draft_sampling(draft_sampling, temperature)
    check_engine(engine, server=server)
    if engine is not None and (temperature > 0 or draft_sampling):
        raise fail("--engine decodes greedily: drop --temperature and --draft-sampling")
    table = CostTable.load(costs) if costs else None
    binary = find_server(server) if engine is not None else None  # before any model loads
    chosen = _chosen(policy, block_size, table, engine is not None, target)
    pin_threads(threads)
    pair = load_pair(target, drafter, dtype, device)
    ids = encode_prompt(pair.tokenizer, Prompt.single("cli", prompt))
    decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=temperature,
                                 max_new_tokens=max_new_tokens, draft_sampling=draft_sampling)
    if engine is not None:
        return _in_engine(pair, decoder, ids, chosen, table, binary, threads, target, drafter)
    costs = table or (cached_costs(decoder, chosen.candidates, pair.metadata(),
                                   stderr.print) if chosen is not None else None)
    try:
        if chosen is None:
            trace = decoder.generate(ids, block_size, seed=seed)
        else:
            trace = decode(decoder, ids, chosen, prompt_id="cli", costs=costs, seed=seed)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    _print_decode(pair.tokenizer, trace, "fixed" if chosen is None else chosen.name)


def _check_prompt(prompt: str) -> None:
    """Refuse an empty prompt or one that is not UTF-8 text, before anything loads."""
    if not prompt.strip():
        raise fail("empty prompt: pass the text to decode, e.g. specpolicy generate \"Hello\"")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise fail("the prompt is not valid UTF-8 text (check the terminal's encoding); pass "
                   "UTF-8 text") from None


def _print_decode(tokenizer, trace, source: str) -> None:
    """The decoded text on stdout (unwrapped in a file or pipe), what the decoder did on stderr."""
    stdout.print(tokenizer.decode(trace.output_ids, skip_special_tokens=True), markup=False, highlight=False,
                 soft_wrap=True)
    sizes = sorted({c.block_size for c in trace.cycles})
    label = f"block size {sizes[0]}" if len(sizes) == 1 else f"block sizes {sizes}"
    stderr.print(
        f"{label} ({source}) | tau {trace.tau:.2f} | {trace.tokens_per_second:.1f} tokens/s | "
        f"{len(trace.output_ids)} tokens, stop: {trace.stop_reason}", soft_wrap=True
    )


def _in_engine(pair, decoder, ids: list[int], chosen, costs, binary, threads: int, target: str,
               drafter: str) -> None:
    """The prompt decoded in llama.cpp with ``chosen``'s plan, made from the target's prefill here (what
    BlockPilot reads); the text on stdout, what the engine ran on stderr."""
    from specpolicy.decoding.engine import observe
    from specpolicy.evaluation.engine import generate_engine

    session = decoder.start(ids)
    try:
        reply, setting = generate_engine(ids, chosen, observe(session.state, "cli", costs),
                                         decoder.max_new_tokens, largest=pair.drafter.block_size,
                                         threads=threads, server=binary, target=target, drafter=drafter,
                                         report=lambda line: stderr.print(line, highlight=False))
    except ValueError as exc:
        raise fail(str(exc)) from exc
    stdout.print(pair.tokenizer.decode(list(reply.tokens), skip_special_tokens=True), markup=False,
                 highlight=False, soft_wrap=True)
    ran = ("a per-step plan on the patched server" if setting.plan else "plain decoding"
           if setting.block_size == 1 else f"n_max {setting.block_size - 1}, p_min {setting.p_min:g}")
    stderr.print(f"llama.cpp: {ran} ({chosen.name}) | tau {reply.tau:.2f} | "
                 f"{len(reply.tokens) / reply.seconds if reply.seconds else 0:.1f} tokens/s | "
                 f"{len(reply.tokens)} tokens", soft_wrap=True, highlight=False)


def _chosen(policy: str, block_size: int | None, costs, engine: bool, target: str):
    """The policy to decode with (``None``: the fixed ``block_size`` in specpolicy's decoder), over the sizes
    ``costs`` prices (in llama.cpp, up to the drafter's trained block), checked before any model loads: a
    cost-aware one in the engine needs the engine's table."""
    import numpy as np

    from specpolicy.checks import check_vocabulary
    from specpolicy.decoding.engine import check_live
    from specpolicy.evaluation.engine import engine_sizes, for_engine
    from specpolicy.models.sources import target_vocab_size
    from specpolicy.policy import PromptObservation
    from specpolicy.registry import get_registry

    if block_size is not None and not engine:
        return None
    sizes = [b for b in DEFAULT_CANDIDATES if costs is None or b in costs.block_sizes]
    sizes = engine_sizes(sizes) if engine else sizes
    chosen = for_engine(get_registry().create(policy if block_size is None else f"fixed{block_size}", sizes),
                        sizes)
    check_live([chosen], f"compare it on a sweep (`specpolicy compare --sweep DIR --policies {chosen.name}`)")
    check_vocabulary([chosen], target_vocab_size(target), f"target {target!r}")
    if engine and costs is None:
        try:
            chosen.checked_plan(PromptObservation(np.zeros(target_vocab_size(target) or 0, np.float32), 1))
        except ValueError as error:
            raise fail(f"{chosen.name} plans with a cost table; in the engine, pass the engine's: --costs "
                       "FILE (`specpolicy compare --engine llamacpp --steps DIR` saves it as DIR/costs.json)"
                       if "cost-aware" in str(error) else str(error)) from None
    return chosen

