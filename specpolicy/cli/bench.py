"""``specpolicy bench ...``: benchmarks that print numbers (never used as test assertions)."""

from __future__ import annotations

import typer

from specpolicy.cli.common import DeviceOption, DrafterOption, DtypeOption, OutputFormat, emit, fail, stderr

app = typer.Typer(help="Benchmarks on this machine.", no_args_is_help=True)


@app.command("decode")
def decode(
    target: str = typer.Option(
        "tiny", "--target", help="target: tiny, random (random weights, built in memory), a local folder or a hub id"
    ),
    drafter: str = DrafterOption,
    prompts: int = typer.Option(8, min=1, help="number of held-out ShareGPT prompts"),
    max_new_tokens: int = typer.Option(128, min=2, help="tokens generated per prompt"),
    block_size: int = typer.Option(16, min=1, help="speculative block size B"),
    device: str = DeviceOption,
    dtype: str = DtypeOption,
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format"),
) -> None:
    """Loop overhead, AR vs speculative tokens/s through one decoder, and transformers' generate."""
    from specpolicy.bench.decode import bench_decode

    try:
        if target == "random":
            import torch

            from specpolicy.models.testing import make_pair

            model, draft = make_pair(vocab=4096, hidden=256, layers=6)
            ids = [torch.randint(5, 4000, (64,)).tolist() for _ in range(prompts)]
        else:
            from specpolicy.data.builtin import sample, sharegpt_prompts
            from specpolicy.data.prompts import encode_prompts
            from specpolicy.models import load_pair

            pair = load_pair(target, drafter, dtype, device)
            model, draft = pair.target, pair.drafter
            ids = encode_prompts(pair.tokenizer, sample(sharegpt_prompts(), prompts, seed=0), max_tokens=256)
    except (FileNotFoundError, ValueError) as exc:
        raise fail(str(exc)) from exc
    stderr.print(f"decoding {prompts} prompts x {max_new_tokens} tokens at B=1 and B={block_size} ...")
    result = bench_decode(model, draft, ids, block_size=block_size, max_new_tokens=max_new_tokens)
    emit([{"metric": k, "value": v} for k, v in result.rows()], fmt, title="specpolicy bench decode")
