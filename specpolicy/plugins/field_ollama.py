"""ollama's DFlash depth controller (``x/mlxrunner/speculate_depth.go`` @c1bf60d, #17571; docs/field.md): the
depth with the most expected committed tokens per unit of cost, from per-position acceptance and a cost per
depth (the cycle's modelled seconds in replay), probing deeper with backoff; one controller serves every
request, as in the engine (``resume``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from specpolicy.plugins.field_rules import ControllerState as State
from specpolicy.plugins.field_rules import field_policy


@dataclass(frozen=True)
class OllamaDepth:
    drafter_limit: int = 15
    probe_interval: int = 4
    probe_interval_max: int = 512
    cost_alpha: float = 0.3
    cost_clamp: float = 0.25
    acceptance_alpha: float = 0.1
    acceptance_min_samples: int = 10
    reads_time = True
    TERMS: ClassVar[dict[str, str]] = {
        "drafter_limit": "# drafterLimit", "probe_interval": "depthProbeInterval",
        "probe_interval_max": "depthProbeIntervalMax", "cost_alpha": "costEWMAAlpha",
        "cost_clamp": "costClampFraction", "acceptance_alpha": "acceptanceEWMAAlpha",
        "acceptance_min_samples": "acceptanceMinSamples"}

    def start(self, prompt_length: int) -> State:
        return State(cost={}, rate=[0.0], seen=[0], probed=False, interval=self.probe_interval, since=0,
                     last=0, scheduled=0, previous=-1)

    def resume(self, s: State) -> State:
        s.previous = -1  # a new request's first round records no cost
        return s

    def choices(self) -> set[int]:
        return set(range(1, self.drafter_limit + 2))

    def block(self, s: State, batch: int) -> int:
        return s.scheduled + 1

    def update(self, s: State, length: int, accepted: int, seconds: float) -> None:
        drafts = length - 1
        if drafts == s.previous and seconds > 0:
            old = s.cost.get(drafts)
            s.cost[drafts] = seconds if old is None else old + self.cost_alpha * max(
                -self.cost_clamp * old, min(self.cost_clamp * old, seconds - old))
        s.previous = drafts
        for i in range(1, drafts + 1):
            if accepted < i - 1:
                break
            while len(s.seen) <= i:
                s.rate, s.seen = [*s.rate, 0.0], [*s.seen, 0]
            hit = float(accepted >= i)
            s.rate[i] = hit if s.seen[i] == 0 else s.rate[i] + self.acceptance_alpha * (hit - s.rate[i])
            s.seen[i] += 1
        s.scheduled = self._next(s)

    def _trusted(self, s: State, i: int) -> bool:
        return 1 <= i < len(s.seen) and s.seen[i] >= self.acceptance_min_samples

    def _limit(self, s: State) -> int:
        frontier = next(i - 1 for i in range(1, len(s.seen) + 1) if not self._trusted(s, i))
        return min(frontier + 1, self.drafter_limit) if self.drafter_limit > 0 else frontier + 1

    def _cost(self, s: State, n: int) -> float:
        depths = sorted(s.cost)
        if n <= depths[0] or n >= depths[-1]:
            return s.cost[depths[0] if n <= depths[0] else depths[-1]]
        high = next(d for d in depths if d >= n)
        low = max(d for d in depths if d < n)
        return s.cost[low] + (n - low) / (high - low) * (s.cost[high] - s.cost[low])

    def _committed(self, s: State, n: int) -> float:
        total, product = 1.0, 1.0
        for k in range(1, n + 1):
            trusted = next((j for j in range(k, 0, -1) if self._trusted(s, j)), None)
            product *= s.rate[trusted] if trusted else 1.0
            total += product
        return total

    def _selected(self, s: State) -> int:
        if len(s.cost) < 2:
            return 0
        scores = [self._committed(s, n) / self._cost(s, n) for n in range(self._limit(s) + 1)]
        return max(range(len(scores)), key=lambda n: (scores[n], -n))

    def _next(self, s: State) -> int:
        selected = self._selected(s)
        if selected != s.last:
            s.interval, s.since, s.last = self.probe_interval, 0, selected
        elif s.probed:
            s.interval = min(s.interval * 2, self.probe_interval_max)
        s.probed, s.since = False, s.since + 1
        if s.since >= s.interval:
            s.since = 0
            probe = min(selected + 1, self._limit(s))
            if probe != selected:
                s.probed = True
                return probe
        return next((n for n in range(self._limit(s) + 1) if n not in s.cost), selected)


ollama_policy = field_policy("ollama", OllamaDepth)
