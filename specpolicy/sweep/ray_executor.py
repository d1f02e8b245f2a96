"""Sweeps on Ray: prompts sharded over workers (one per GPU), each loading the pair once; records return to
the driver, which appends them to the one single-writer store (resume and checksums as locally)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specpolicy.data.prompts import Prompt
from specpolicy.defaults import RAY_SHARD_SIZE
from specpolicy.sweep.run import run_sweep, sweep_prompt
from specpolicy.sweep.settings import SweepSettings
from specpolicy.sweep.store import SweepStore


def _require_ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("--executor ray needs Ray: pip install 'specpolicy[ray]' (or pip "
                           "install ray)") from None
    return ray


def _sweep_shard(settings: SweepSettings, shard: list[tuple[int, Prompt]]) -> list[tuple[dict, list[float]]]:
    """Run on a worker: load the pair once, sweep the shard, return (record, features) pairs."""
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair

    pair = load_pair(settings.target, settings.drafter, settings.dtype, settings.device)
    decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=settings.temperature,
                                 max_new_tokens=settings.max_new_tokens)
    out = []
    for index, prompt in shard:
        record, features = sweep_prompt(decoder, prompt, index, settings, pair.tokenizer)
        out.append((record, features.tolist()))
    return out


def run_sweep_ray(
    settings: SweepSettings,
    out: str,
    prompts: Sequence[Prompt],
    num_workers: int | None = None,
    shard_size: int = RAY_SHARD_SIZE,
    on_progress: Callable[[int, int], None] | None = None,
) -> SweepStore:
    """:func:`~specpolicy.sweep.run.run_sweep` with prompts sharded over Ray tasks (a GPU each on CUDA)."""
    ray = _require_ray()
    import torch

    settings.validate()
    if not ray.is_initialized():
        ray.init(num_cpus=num_workers, include_dashboard=False, log_to_driver=False)
    # the driver writes metadata and the latency table with one local pass over no prompts
    store = run_sweep(settings, out, [])
    done = store.done_ids()
    todo = [(i, p) for i, p in enumerate(prompts) if p.id not in done]
    gpus = 1 if settings.device.startswith("cuda") else 0
    task = ray.remote(num_gpus=gpus, num_cpus=1)(_sweep_shard)
    pending = [task.remote(settings, todo[i : i + shard_size]) for i in range(0, len(todo), shard_size)]
    finished = len(prompts) - len(todo)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for record, features in ray.get(ready[0]):
            store.append(record, torch.tensor(features))
            finished += 1
        if on_progress:
            on_progress(finished, len(prompts))
    return store
