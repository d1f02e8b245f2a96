"""What a comparison is asked, checked before any model loads (no torch): :class:`CompareOptions`, the one
check of ``specpolicy compare``'s options and :func:`~specpolicy.evaluation.compare.compare_sweep`'s."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path

from specpolicy import defaults
from specpolicy.arguments import check_candidate_set, check_counts, check_engine, check_temperature
from specpolicy.evaluation.report import check_plot_path
from specpolicy.files import check_replaceable
from specpolicy.replay.batch_costs import BatchCostTable

BY = ("category", "group", "context")
"""the prompt labels ``by`` reports per (``context``: a stored prompt's length bucket)"""
SWEEP_SETTINGS = ("datasets", "temperature", "max_samples", "max_new_tokens", "seed", "target", "drafter",
                  "device", "dtype", "threads")
"""what a fresh sweep is made with (refused beside ``sweep``, which has its own)"""
STEPS_TABLE = "costs.json"
"""the engine's cost table in a ``--steps`` folder, beside each policy's replies: what marks such a folder"""


def serving_inputs_missing(sweep: object, batch_costs: object) -> str:
    """The options a serving simulation lacks, as a user passes them (``""``: none): one refusal."""
    return " and ".join(option for option, absent in (
        ("--sweep DIR (a stored sweep)", sweep is None),
        (f"--batch-costs FILE (a shipped table such as {BatchCostTable.SHIPPED}, or one measured with "
         "`specpolicy bench batch-latency --out FILE`)", batch_costs is None)) if absent)


class Mode(str, Enum):
    replay = "replay"
    live = "live"


@dataclass
class CompareOptions:
    """Everything a comparison was asked for, checked (:meth:`validate`) before any model loads."""

    policies: list[str]
    datasets: list[str] = field(default_factory=lambda: [defaults.DATASET])
    mode: Mode = Mode.replay
    sweep: Path | None = None
    candidates: list[int] | None = None
    temperature: float = 0.0
    max_samples: int = defaults.COMPARE_SAMPLES
    max_new_tokens: int = defaults.MAX_NEW_TOKENS
    seed: int = 0
    baseline: str = defaults.COMPARE_BASELINE
    costs: tuple[Path, ...] = ()
    """cost tables replay prices with: one, or several measured at different context lengths"""
    threads: int = defaults.DEFAULT_THREADS
    target: str = defaults.DEFAULT_MODEL
    drafter: str = defaults.DEFAULT_MODEL
    device: str = defaults.DEFAULT_DEVICE
    dtype: str = defaults.DEFAULT_DTYPE
    plot: Path | None = None
    oracle: str = defaults.COMPARE_ORACLE
    concurrency: tuple[int, ...] = (1,)
    """requests served together: one value, or several (a map over concurrencies)"""
    batch_costs: Path | None = None
    decode_only: bool = False
    """serving prices decode steps only (each request's prefill left out, as a time per output token)"""
    split: str | None = None
    by: str | None = None
    engine: str | None = None
    """a serving engine the policies run in (``llamacpp``), measured there"""
    server: str | None = None
    steps: Path | None = None
    """a folder for the engine's replies, a JSONL per policy (``import-traces`` reads them)"""

    def given(self, name: str) -> bool:
        """Whether the option ``name`` differs from its default."""
        spec = next(f for f in fields(self) if f.name == name)
        default = spec.default_factory() if callable(spec.default_factory) else spec.default
        return getattr(self, name) != default

    def validate(self) -> None:
        """Fail on options that cannot work together, before anything loads."""
        check_temperature(self.temperature, "--temperature")
        if isinstance(self.policies,
                      str) or not self.policies or not all(isinstance(n, str) for n in self.policies):
            raise ValueError("policies must be a list of policy names such as ['fixed16', 'blockpilot'], "
                             f"got {self.policies!r}")
        self.concurrency = check_counts(self.concurrency, "concurrency")
        if self.candidates is not None:
            self.candidates = list(check_candidate_set(self.candidates, "candidates"))
        twice = sorted({name for name in self.policies if self.policies.count(name) > 1})
        if twice:
            raise ValueError(f"--policies names {', '.join(twice)} twice; name each policy once")
        for option in ("baseline", "oracle"):
            name = getattr(self, option)
            if self.given(option) and name not in self.policies:  # the defaults may be left out of --policies
                raise ValueError(f"--{option} {name} is not among --policies ({','.join(self.policies)}); "
                                 "add it there, or name one of those")
        self._validate_where()
        self._validate_costs()
        if self.plot is not None:
            check_plot_path(self.plot)

    def _validate_where(self) -> None:
        """The engine, the labels and the stored sweep."""
        check_engine(self.engine, server=self.server)
        if self.engine and (self.mode is Mode.live or self.batch_costs is not None or self.costs):
            raise ValueError("--engine measures the engine and prices replay with the engine's own cost "
                             "table; drop --mode live, --costs and --batch-costs")
        if self.steps is not None and not self.engine:
            raise ValueError("--steps saves the engine's per-step records: add --engine llamacpp, or drop it")
        if self.steps is not None:  # a new folder, or an earlier run's (replaced whole, never mixed)
            check_replaceable(self.steps, STEPS_TABLE)
        if self.by not in (None, *BY):
            raise ValueError(f"--by {self.by} is not a prompt label; use --by category, group or context")
        if self.by == "context" and self.sweep is None:
            raise ValueError("--by context reads each stored prompt's length: pass --sweep DIR")
        if self.sweep is not None:
            engine_pair = ("target", "drafter", "threads") if self.engine else ()  # the engine runs them
            ignored = [{"datasets": "--dataset"}.get(name, f"--{name.replace('_', '-')}")
                       for name in SWEEP_SETTINGS if self.given(name) and name not in engine_pair]
            if ignored:
                raise ValueError("--sweep evaluates a stored sweep with its own prompts and settings; "
                                 f"{', '.join(ignored)} would be ignored: drop them, or drop --sweep to "
                                 "sweep anew")
        elif self.split is not None:
            raise ValueError("--split picks one side of a --sweep store (train or validation, by "
                             "conversation and input, as `specpolicy train` splits it); pass --sweep DIR")

    def _validate_costs(self) -> None:
        """The cost tables and the serving simulation."""
        if not isinstance(self.costs, tuple):
            raise ValueError("costs must be a list of cost tables' paths such as ['table.json'], got "
                             f"{self.costs!r}")
        if len(self.costs) > 1 and self.mode is Mode.live:
            raise ValueError("several --costs tables price replay by each prompt's context; live decoding "
                             "reads one table: pass one")
        if self.batch_costs is not None and self.costs:
            raise ValueError("--costs prices one request at a time and serving prices every step with "
                             "--batch-costs; drop --costs (the batch table gives each concurrency's "
                             "per-request costs)")
        missing = serving_inputs_missing(self.sweep, self.batch_costs)
        if (max(self.concurrency) > 1 or self.batch_costs is not None) and missing:
            raise ValueError(f"--concurrency N simulates serving: pass {missing}")
        if self.decode_only and self.batch_costs is None:
            raise ValueError("--decode-only leaves the prefill out of a served request's time: add "
                             "--batch-costs FILE, or drop it (one request at a time prices no prefill)")
        if self.batch_costs is not None:
            BatchCostTable.load(self.batch_costs).check_batches(self.concurrency)
