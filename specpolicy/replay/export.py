"""Engine configurations, priced as the engines run them (no torch; read from their source): vLLM ``dflash``
drafts B = N + 1 every step and verifies K + 1 per batch size (``num_speculative_tokens_per_batch_size``, K
clamped to N); SGLang ``DFLASH`` runs one static B (1: speculation off)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specpolicy.arguments import check_block_size, check_count
from specpolicy.cycles import CycleRecord, Plan
from specpolicy.policy import Answers, Policy, PromptObservation

Throughput = Callable[["VllmConfig | SglangConfig", int], float]
"""(an engine configuration, a concurrency) -> its modelled output tokens per second there"""


def vllm_schedule(drafts_by_batch: Mapping[int, int]) -> list[list[int]]:
    """``{batch size: K}`` -> vLLM's ``[[start_bs, end_bs, K], ...]`` (runs of equal K merged)."""
    sizes = sorted(drafts_by_batch)
    ranges: list[list[int]] = []
    for batch, end in zip(sizes, [*(b - 1 for b in sizes[1:]), sizes[-1]]):
        k = drafts_by_batch[batch]
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = end
        else:
            ranges.append([batch, end, k])
    return ranges


def vllm_lookup(num_speculative_tokens: int, ranges: list[list[int]]) -> dict[int, int]:
    """vLLM's dense ``{batch size: K}`` from the ranges, K clamped to ``num_speculative_tokens``; a schedule
    vLLM refuses at start-up (``validate_and_normalize_dynamic_sd_schedule`` @14b450c) is refused."""
    name = "num_speculative_tokens_per_batch_size"
    if any(not isinstance(entry, (list, tuple)) or len(entry) != 3 for entry in ranges):
        raise ValueError(f"{name} entries must be 3-item [start, end, K] (the 5-item form with context "
                         "ranges is not modelled here)")
    dense: dict[int, int] = {}
    previous_end = 0
    for start, end, k in sorted(ranges):
        if start < 1 or end < start or k < 0:
            raise ValueError(f"{name} entry {[start, end, k]} is not [start >= 1, end >= start, K >= 0]")
        if start <= previous_end:
            raise ValueError(f"{name} ranges overlap at batch size {start}; vLLM refuses overlapping ranges")
        if previous_end == 0 and start != 1:
            raise ValueError(f"{name} must start at batch size 1 (its first range starts at {start}), as "
                             "vLLM requires")
        previous_end = end
        dense.update({batch: min(num_speculative_tokens, k) for batch in range(start, end + 1)})
    return dense


@dataclass(frozen=True)
class VllmConfig:
    """vLLM's DFlash ``speculative_config``: a fixed drafted block of ``num_speculative_tokens + 1`` and the
    verified drafts K per batch size (``per_batch``, clamped as vLLM clamps them)."""

    num_speculative_tokens: int
    per_batch: dict[int, int]
    model: str = ""

    def __post_init__(self) -> None:
        check_count(self.num_speculative_tokens, "num_speculative_tokens (DFlash drafts at least one)")
        clamped = {int(b): min(self.num_speculative_tokens, int(k)) for b, k in self.per_batch.items()}
        object.__setattr__(self, "per_batch", clamped)

    def verified(self, concurrency: int) -> int:
        """K at ``concurrency`` (the last range's beyond it; N without a schedule)."""
        covered = [batch for batch in self.per_batch if batch <= concurrency]
        return self.per_batch[max(covered)] if covered else self.num_speculative_tokens

    def shape(self, concurrency: int = 1) -> tuple[int, int]:
        """(B, L) vLLM runs at ``concurrency``: draft B = N + 1, verify L = K + 1."""
        return self.num_speculative_tokens + 1, self.verified(concurrency) + 1

    def plan(self) -> Plan:
        """vLLM's plan: a block of N + 1, K from the requests a step schedules (``state.batch``)."""
        plan = Plan.fixed(self.num_speculative_tokens + 1)
        if not self.per_batch:
            return plan
        return plan.with_length(
            lambda state, drafted: min(self.verified(state.batch) + 1, drafted.block_size), reads_block=False)

    def dflash_mlx_args(self, block: int) -> list[str] | None:
        """``dflash serve``'s flags running this shape at one request, where it drafts the checkpoint's
        ``block`` (dflash-mlx drafts no other; ``None``), verifying at most L of it."""
        drafted, length = self.shape()
        return None if drafted != block else [
            "--draft-model", self.model, "--verify-mode", "dflash", "--verify-len-cap", str(length)]

    def to_json(self) -> dict:
        """The ``speculative_config``; without a schedule the key is left out (vLLM refuses an empty one)."""
        config = {"method": "dflash", "model": self.model,
                  "num_speculative_tokens": self.num_speculative_tokens}
        return config | ({"num_speculative_tokens_per_batch_size": vllm_schedule(self.per_batch)}
                         if self.per_batch else {})

    @classmethod
    def from_json(cls, config: Mapping) -> VllmConfig:
        """A ``speculative_config`` as vLLM reads it (schedule clamped to ``num_speculative_tokens``)."""
        if config.get("method") != "dflash":
            raise ValueError("expected a DFlash speculative_config (method 'dflash'), got "
                             f"{config.get('method')!r}")
        n = check_count(config["num_speculative_tokens"],
                        "num_speculative_tokens (DFlash drafts at least one)")
        if config.get("num_speculative_tokens_per_batch_size", None) == []:
            raise ValueError("num_speculative_tokens_per_batch_size is [], which vLLM refuses; leave the "
                             "key out for the same K at every batch size")
        return cls(n, vllm_lookup(n, config.get("num_speculative_tokens_per_batch_size") or []),
                   str(config.get("model", "")))


@dataclass(frozen=True)
class SglangConfig:
    """SGLang's DFlash launch flags: one static block size for every batch size (1: speculation off)."""

    block_size: int
    draft_model: str = ""

    def shape(self, concurrency: int = 1) -> tuple[int, int]:
        """(B, L) SGLang runs at any concurrency: its one block, verified whole."""
        return check_block_size(self.block_size), self.block_size

    def plan(self) -> Plan:
        return Plan.fixed(*self.shape())

    def args(self, engine: str = "sglang") -> list[str]:
        """SGLang's launch flags, or mlx-vlm's (``mlx_vlm.server``: one block too); none for B = 1."""
        if self.block_size == 1:
            return []
        if engine == "mlx-vlm":
            return ["--draft-model", self.draft_model, "--draft-kind", "dflash", "--draft-block-size",
                    str(self.block_size)]
        return ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", self.draft_model,
                "--speculative-num-draft-tokens", str(self.block_size)]

    @classmethod
    def from_args(cls, args: list[str]) -> SglangConfig:
        """The flags :meth:`args` writes (no flags: speculation off)."""
        if not args:
            return cls(1)
        flags = dict(zip(args[::2], args[1::2]))
        if flags.get("--speculative-algorithm") != "DFLASH":
            raise ValueError("expected --speculative-algorithm DFLASH, got "
                             f"{flags.get('--speculative-algorithm')!r}")
        size = flags.get("--speculative-num-draft-tokens", flags.get("--speculative-dflash-block-size"))
        return cls(int(size), flags.get("--speculative-draft-model-path", ""))


def load_engine_config(path: str | Path, engine: str) -> VllmConfig | SglangConfig:
    """An ``export`` document, or a bare vLLM ``speculative_config``, read as ``engine`` (vllm, sglang)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"no engine config at {file}; write one with `specpolicy export POLICY "
                                f"--sweep DIR --batch-costs FILE --out {file}`")
    try:
        document = json.loads(file.read_text())
        if (engine == "vllm" and isinstance(document, dict)
                and document.get("vllm_speculative_config", {}) is None):
            raise ValueError(f"{file} holds no vLLM configuration: the exported policy never drafts (vLLM's "
                             "DFlash drafts at least 2 tokens); read it as sglang-config:FILE (speculation "
                             "off)")
        if engine == "vllm":
            return VllmConfig.from_json(document.get("vllm_speculative_config", document))
        return SglangConfig.from_args(document["sglang_args"])
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{file} is not an export document or a {engine} config "
                         f"({type(exc).__name__}: {exc})") from exc


def _most_run(values: Iterable[int]) -> int | None:
    """The value run most often (ties: the larger); ``None`` for none."""
    counts = Counter(values)
    return max(counts, key=lambda v: (counts[v], v)) if counts else None


def closest_configs(cycles_by_batch: Mapping[int, Sequence[CycleRecord]], model: str
                    ) -> tuple[VllmConfig | None, SglangConfig]:
    """The engine configurations closest to a policy's served cycles: SGLang's B is the one it runs most; vLLM
    drafts its most common B > 1 and verifies per batch size the most common L there (``None``: no drafts)."""
    every = [cycle for cycles in cycles_by_batch.values() for cycle in cycles]
    sglang = SglangConfig(_most_run(c.block_size for c in every) or 1, model)
    block = _most_run(c.block_size for c in every if c.block_size > 1)
    if block is None:
        return None, sglang
    lengths = {batch: _most_run(min(c.verify_length, block) for c in cycles if c.block_size > 1)
               for batch, cycles in cycles_by_batch.items()}
    per_batch = {batch: length - 1 for batch, length in lengths.items() if length is not None}
    return VllmConfig(block - 1, {} if set(per_batch.values()) <= {block - 1} else per_batch, model), sglang


def choose_sglang(sizes: Sequence[int], batches: Sequence[int], throughput: Throughput,
                  draft_model: str = "") -> SglangConfig:
    """The fastest static SGLang configuration for a store (``export --fastest``): the one block size with the
    most modelled throughput summed over ``batches`` (1 = speculation off)."""
    return max((SglangConfig(size, draft_model) for size in sizes),
               key=lambda config: sum(throughput(config, batch) for batch in batches))


def choose_vllm(sizes: Sequence[int], batches: Sequence[int], throughput: Throughput,
                model: str = "") -> VllmConfig:
    """The fastest static vLLM configuration for a store (``export --fastest``): the block with the most
    summed throughput verified whole, then per batch size the fastest verify length, each simulated as run."""
    drafted = [size for size in sizes if size > 1]
    if not drafted:
        raise ValueError(f"vLLM's DFlash drafts at least 2 tokens; the sweep's sizes {list(sizes)} have "
                         "none above 1")
    block = choose_sglang(drafted, batches, throughput).block_size
    options = sorted({min(size, block) - 1 for size in sizes})
    best = {batch: max(options,
                       key=lambda k, b=batch: (throughput(VllmConfig(block - 1, {b: k}, model), b), k))
            for batch in batches}
    return VllmConfig(block - 1, best, model)


class EngineConfigPolicy(Policy):
    """An engine's static configuration: the block it drafts and the length it verifies per concurrency."""

    def __init__(self, config: VllmConfig | SglangConfig, candidates: Sequence[int]) -> None:
        super().__init__(candidates)
        self.config = config

    def choices(self) -> set[int]:
        return {self.config.plan().block_size}

    def select(self, observation: PromptObservation) -> int:
        return self.config.plan().block_size

    def plan(self, observation: PromptObservation, answers: Answers | None = None) -> Plan:
        return self.config.plan()


def _loaded(engine: str, arg: str | None, candidates: Sequence[int]) -> EngineConfigPolicy:
    if not arg:
        raise ValueError(f"{engine}-config needs a file: {engine}-config:FILE (from `specpolicy export "
                         "POLICY --sweep DIR --batch-costs FILE --out FILE`)")
    return EngineConfigPolicy(load_engine_config(arg, engine), candidates)


def vllm_config_policy(arg: str | None, candidates: Sequence[int]) -> EngineConfigPolicy:
    return _loaded("vllm", arg, candidates)


def sglang_config_policy(arg: str | None, candidates: Sequence[int]) -> EngineConfigPolicy:
    return _loaded("sglang", arg, candidates)
