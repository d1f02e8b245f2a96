"""Policy evaluation from a sweep store (replay) or by live decoding, with paired bootstrap intervals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from specpolicy.decoding import DecodeState, SpeculativeDecoder
from specpolicy.policy import TRAINING_BLOCK_SIZE, Policy, PromptObservation, oracle_label
from specpolicy.sweep.latency import modelled_seconds
from specpolicy.sweep.replay import ReplayTable, mean_acceptance
from specpolicy.sweep.store import SweepStore


@dataclass
class PromptResult:
    """One policy on one prompt."""

    prompt_id: str
    block_sizes: list[int]
    tau: float
    tokens: int
    seconds: float
    ar_seconds_per_token: float | None
    oracle_block_size: int | None

    @property
    def chosen(self) -> int:
        return self.block_sizes[0] if self.block_sizes else 0

    @property
    def seconds_per_token(self) -> float:
        return self.seconds / max(1, self.tokens)


@dataclass
class PolicyResults:
    """All prompts of one policy; ``timing`` is ``modelled`` (replay) or ``measured`` (live)."""

    policy: str
    timing: str
    prompts: list[PromptResult] = field(default_factory=list)

    def taus(self) -> np.ndarray:
        return np.array([p.tau for p in self.prompts])


def check_candidates(policy: Policy, available: Sequence[int]) -> None:
    """Fail, naming both sides, when ``policy`` can choose a block size the sweep did not record."""
    wanted = policy.choices()
    missing = sorted(wanted - set(available))
    if missing:
        raise ValueError(f"policy {policy.name!r} chooses among {sorted(wanted)} but the sweep recorded "
                         f"{sorted(available)} (missing {missing}); sweep those block sizes or pass "
                         f"--candidates {','.join(map(str, sorted(available)))}")


def _observation(store: SweepStore, record: dict) -> PromptObservation:
    logits = store.features(record).numpy() if "features" in record else np.zeros(0, dtype=np.float32)
    return PromptObservation(logits, record.get("prompt_length", 0), record["prompt_id"], record)


def evaluate_replay(
    store: SweepStore,
    policies: Sequence[Policy],
    on_prompt: Callable[[], None] | None = None,
) -> list[PolicyResults]:
    """Evaluate policies on every valid record of ``store`` by exact replay (or stored taus)."""
    for policy in policies:
        check_candidates(policy, store.candidates)
    latency = store.latency()
    training = int(store.meta.get("training_block_size", TRAINING_BLOCK_SIZE))
    ar_spt = latency["verify_seconds"]["1"] if latency else None
    results = [PolicyResults(p.name, "modelled" if latency else "none") for p in policies]
    records = list(store.records())
    if not records:
        raise ValueError(f"sweep store {store.path} has no valid records; run or resume the sweep first")
    for record in records:
        observation = _observation(store, record)
        taus = record["taus"]
        record_training = int(record.get("training_block_size", training))
        oracle = store.candidates[oracle_label([taus[str(b)] for b in store.candidates], store.candidates,
                                               record_training)]
        table = ReplayTable.from_record(record) if "replay" in record else None
        for policy, result in zip(policies, results):
            schedule = policy.schedule(observation)
            if table is not None:
                logits = torch.from_numpy(observation.logits) if observation.logits.size else None
                cycles = table.simulate(schedule, logits)
                sizes = [c.block_size for c in cycles]
                tau = mean_acceptance(cycles)
                tokens = sum(c.committed for c in cycles)
            elif isinstance(schedule, int):
                sizes, tau, tokens = [schedule], float(taus[str(schedule)]), 0
            else:
                raise ValueError(f"per-cycle policy {policy.name!r} needs a replay sweep; {store.path} has only taus")
            seconds = modelled_seconds(latency, sizes) if latency and sizes else 0.0
            result.prompts.append(PromptResult(record["prompt_id"], sizes, tau, tokens, seconds, ar_spt, oracle))
        if on_prompt:
            on_prompt()
    return results


def live_schedule(policy: Policy, prompt_id: str, prompt_length: int) -> Callable[[DecodeState], int]:
    """A decoder callback running ``policy`` live: per-prompt policies decide once, from the prefill logits."""
    chosen: dict[str, int | Callable[[DecodeState], int]] = {}

    def choose(state: DecodeState) -> int:
        if "schedule" not in chosen:
            chosen["schedule"] = policy.schedule(PromptObservation(state.prefill_logits.numpy(), prompt_length,
                                                                   prompt_id))
        schedule = chosen["schedule"]
        return schedule if isinstance(schedule, int) else schedule(state)

    return choose


def evaluate_live(
    decoder: SpeculativeDecoder,
    prompts: Sequence[tuple[str, list[int]]],
    policies: Sequence[Policy],
    seed: int = 0,
    on_prompt: Callable[[], None] | None = None,
) -> list[PolicyResults]:
    """Decode every prompt with every policy (and B = 1 for measured speedup)."""
    for policy in policies:
        if policy.needs_sweep:
            raise ValueError(f"policy {policy.name!r} reads a sweep store and cannot run live; use --mode replay")
    results = [PolicyResults(p.name, "measured") for p in policies]
    for prompt_id, ids in prompts:
        ar = decoder.generate(ids, 1, seed=seed)
        for policy, result in zip(policies, results):
            trace = decoder.generate(ids, live_schedule(policy, prompt_id, len(ids)), seed=seed)
            result.prompts.append(PromptResult(prompt_id, [c.block_size for c in trace.cycles], trace.tau,
                                               trace.cycle_tokens, trace.decode_seconds,
                                               ar.time_per_output_token, None))
        if on_prompt:
            on_prompt()
    return results


# --- metrics -------------------------------------------------------------------------------------------


def bootstrap_interval(values: np.ndarray, statistic: Callable[[np.ndarray], float], n: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of ``statistic`` over prompts resampled with replacement (rows of ``values``)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(n, len(values)))
    stats = np.array([statistic(values[i]) for i in idx])
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return float("nan"), float("nan")
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def summarize(results: Sequence[PolicyResults], baseline: str = "fixed16", oracle: str = "oracle",
              n_bootstrap: int = 2000) -> list[dict]:
    """One row per policy: tau, speedup, tokens/s, oracle agreement, oracle gap closed, paired CIs vs baseline."""
    by_name = {r.policy: r for r in results}
    base = by_name.get(baseline)
    orc = by_name.get(oracle)
    rows = []
    for result in results:
        taus = result.taus()
        spt = np.array([p.seconds_per_token for p in result.prompts])
        ar = np.array([p.ar_seconds_per_token or np.nan for p in result.prompts])
        timed = result.timing != "none" and np.all(spt > 0)
        speedup = float(np.nanmean(ar) / spt.mean()) if timed else float("nan")
        labels = [p.oracle_block_size for p in result.prompts]
        agreement = (float(np.mean([p.chosen == o for p, o in zip(result.prompts, labels)]))
                     if all(o is not None for o in labels) else float("nan"))
        row = {"policy": result.policy, "prompts": len(taus), "tau": round(float(taus.mean()), 4),
               "speedup": round(speedup, 3), "tokens_per_s": round(float(1 / spt.mean()), 1) if timed else float("nan"),
               "timing": result.timing, "oracle_agreement": round(agreement, 3)}
        if base is not None:
            paired = np.stack([taus, base.taus()], axis=1)
            row["delta_tau_vs_" + baseline] = round(float(taus.mean() - base.taus().mean()), 4)
            lo, hi = bootstrap_interval(paired, lambda v: v[:, 0].mean() - v[:, 1].mean(), n_bootstrap)
            row["delta_ci95"] = f"[{lo:+.3f}, {hi:+.3f}]"
            if orc is not None:
                triple = np.stack([taus, base.taus(), orc.taus()], axis=1)

                def gap(v: np.ndarray) -> float:
                    denominator = v[:, 2].mean() - v[:, 1].mean()
                    return (v[:, 0].mean() - v[:, 1].mean()) / denominator if denominator > 0 else float("nan")

                row["gap_closed"] = round(gap(triple), 3)
                lo, hi = bootstrap_interval(triple, gap, n_bootstrap)
                row["gap_closed_ci95"] = f"[{lo:+.2f}, {hi:+.2f}]"
        rows.append(row)
    return rows
