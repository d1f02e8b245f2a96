"""The field's controllers over measured step times (docs/field.md walks both): ollama's DFlash depth and
mistral.rs's autotuner, each the depth with the most expected committed tokens per second of step (modelled
in replay), probing neighbouring depths, one state for every request as its engine keeps (``resume``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from specpolicy.plugins.field_rules import field_policy
from specpolicy.replay.lanes import State
from specpolicy.state import chain_tokens


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

    def update(self, s: State, length: int, accepted: int, seconds: float, block: int) -> None:
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
        trusted = [next((j for j in range(k, 0, -1) if self._trusted(s, j)), None) for k in range(1, n + 1)]
        return chain_tokens(s.rate[j] if j else 1.0 for j in trusted)[-1]

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


PRIOR_TRIALS, INITIAL_ACCEPTANCE, MAX_ACCEPTANCE = 8.0, 0.8, 0.999
SEQUENCE_DECAY, POPULATION_DECAY, CALIBRATION_DECAY = 0.5 ** (1 / 48), 0.5 ** (1 / 512), 0.5 ** (1 / 256)
CALIBRATION_PRIOR, COST_MIN_WEIGHT, COST_OUTLIER_RATIO, COST_OUTLIER_STREAK = 16.0, 0.25, 3.0, 3
"""the autotuner's constants that are not parameters here (half-lives of 48, 512 and 256 trials)"""


def _record(cost: list, sample: float, clock: int) -> None:
    """``CostEstimate.update`` on [seconds, outliers, samples (-1 as inserted), clock]."""
    cost[2], cost[3] = cost[2] + 1, clock
    if cost[2] == 1:  # the first timing may pay one-off costs: the faster of the two
        cost[0] = min(cost[0], sample)
    elif cost[2] > 1:
        stall = sample > cost[0] * COST_OUTLIER_RATIO  # a stall, unless a streak shows the level moved
        cost[1] = cost[1] + 1 if stall else 0
        if sample * COST_OUTLIER_RATIO < cost[0] or cost[1] >= COST_OUTLIER_STREAK:
            cost[0], cost[1] = sample, 0
        elif not stall:
            cost[0] += max(1 / cost[2], COST_MIN_WEIGHT) * (sample - cost[0])


@dataclass(frozen=True)
class MistralrsAutotune:
    depths: tuple = (2, 3, 4, 6)
    max_drafts: int = 7
    switch_margin: float = 1.03
    probe_interval: int = 32
    warmup_samples: int = 2
    warmup_probe_interval: int = 4
    reads_time = True
    TERMS: ClassVar[dict[str, str]] = {
        "depths": "AUTO_DEPTHS", "max_drafts": "--mtp-n-predict", "switch_margin": "SWITCH_MARGIN",
        "probe_interval": "PROBE_INTERVAL", "warmup_samples": "WARMUP_SAMPLES",
        "warmup_probe_interval": "WARMUP_PROBE_INTERVAL"}

    @cached_property
    def candidates(self) -> list[int]:  # depths_up_to(depths, max_drafts)
        return sorted({d for d in self.depths if d < self.max_drafts} | {self.max_drafts})

    def choices(self) -> set[int]:
        return {d + 1 for d in self.candidates}

    def start(self, prompt_length: int) -> State:
        return State(positions=[], sequence=[0.0, 0.0], calibration={}, cost={}, current={}, decisions={},
                     clock=0, decided=None, key=1)

    def resume(self, s: State) -> State:
        s.sequence, s.decided = [0.0, 0.0], None  # the last request's sequence released
        return s

    def block(self, s: State, batch: int) -> int:
        if s.decided is None:
            s.key = max(batch, 1) if batch <= 8 else -(-batch // 8) * 8  # exact up to 8, then by 8
            s.decided = self._choose(s, s.key)
        return s.decided + 1

    def update(self, s: State, length: int, accepted: int, seconds: float, block: int) -> None:
        proposed = length - 1
        if proposed > 0 and proposed == s.decided:  # a step timed at the depth chosen for it
            _record(s.cost.setdefault((s.key, proposed), [seconds, 0, -1, 0]), seconds, s.clock)
        predicted = self._rates(s, proposed)
        calibration = s.calibration.setdefault(proposed, [0.0, 0.0])
        calibration[0] = calibration[0] * CALIBRATION_DECAY + (accepted + 1) / self._tokens(s, predicted)
        calibration[1] = calibration[1] * CALIBRATION_DECAY + 1
        tried = accepted + (accepted < proposed)  # censored: the first miss is a trial, the rest are not
        s.positions += [[0.0, 0.0] for _ in range(tried - len(s.positions))]
        for position, rate in enumerate(predicted[:tried]):
            hit = float(position < accepted)
            s.positions[position] = [s.positions[position][0] * POPULATION_DECAY + hit,
                                     s.positions[position][1] * POPULATION_DECAY + 1]
            s.sequence = [s.sequence[0] * SEQUENCE_DECAY + hit, s.sequence[1] * SEQUENCE_DECAY + rate]
        s.decided = None

    def _rates(self, s: State, depth: int) -> list[float]:
        """The population's acceptance of draft positions 1..depth, each pulled toward the one before."""
        prior, rates = INITIAL_ACCEPTANCE, []
        for hits, trials in (s.positions + [[0.0, 0.0]] * depth)[:depth]:
            prior = min((hits + PRIOR_TRIALS * prior) / (trials + PRIOR_TRIALS), MAX_ACCEPTANCE)
            rates.append(prior)
        return rates

    def _tokens(self, s: State, rates: list[float]) -> float:
        """Expected committed tokens of a step at these rates, scaled by the request's hits over predicted."""
        scale = (s.sequence[0] + PRIOR_TRIALS) / (s.sequence[1] + PRIOR_TRIALS)
        return chain_tokens(min(rate * scale, MAX_ACCEPTANCE) for rate in rates)[-1]

    def _seconds(self, s: State, key: int, depth: int) -> float | None:
        """A step's seconds: measured, else from the nearest batch, depth or batch's costs."""
        def cell(k: int, d: int) -> float | None:
            return s.cost[k, d][0] if s.cost.get((k, d), [0, 0, 0])[2] > 0 else None
        if cell(key, depth) is not None:
            return cell(key, depth)
        keys = sorted({k for k, d in s.cost if k != key and cell(k, d) is not None},
                      key=lambda k: (abs(k - key), -k))
        near = sorted([(d, cell(key, d)) for d in self.candidates if cell(key, d) is not None],
                      key=lambda pair: abs(pair[0] - depth))
        for other in (k for k in keys if cell(k, depth) is not None):
            scale = next((here / cell(other, d) for d, here in near if cell(other, d) is not None), None)
            if scale is not None:
                return cell(other, depth) * scale
        if near:
            return near[0][1] * ((1 + depth) / (1 + near[0][0]) if depth > near[0][0] else 1.0)
        base = self._seconds(s, keys[0], self.candidates[0]) if keys else None
        secs = self._seconds(s, keys[0], depth) if keys else None
        return None if base is None or secs is None else base + max(secs - base, 0.0) * max(key / keys[0], 1)

    def _choose(self, s: State, key: int) -> int:
        """The depth of the next step: the best score, switching only past the margin, with probes."""
        s.clock += 1
        candidates, current = self.candidates, s.current.get(key)
        calibration = {d: (r + CALIBRATION_PRIOR) / (p + CALIBRATION_PRIOR)
                       for d, (r, p) in s.calibration.items()}
        ranked = sorted([(d, self._tokens(s, self._rates(s, d)) * calibration.get(d, 1.0)
                          / max(secs, sys.float_info.min))
                         for d in candidates if (secs := self._seconds(s, key, d)) is not None],
                        key=lambda pair: -pair[1])  # stable: ties keep the shallower first
        if not ranked:
            chosen = current if current is not None else candidates[len(candidates) // 2]
        elif current in candidates:
            margin = dict(ranked).get(current, 0.0) * self.switch_margin
            chosen = ranked[0][0] if ranked[0][1] > margin else current
        else:
            chosen = ranked[0][0]
        s.current[key], s.decisions[key] = chosen, s.decisions.get(key, 0) + 1
        i = candidates.index(chosen)
        neighbors = candidates[max(0, i - 1):i] + candidates[i + 1:i + 2]
        samples = {d: s.cost.get((key, d), [0, 0, 0, 0])[2] for d in neighbors}
        under = [d for d in neighbors if samples[d] < self.warmup_samples]
        if under and s.decisions[key] % self.warmup_probe_interval == 0:
            return min(under, key=samples.get)
        if neighbors and s.decisions[key] % self.probe_interval == 0:
            return min(neighbors, key=lambda d: s.cost.get((key, d), [0, 0, 0, 0])[3])
        return chosen


ollama_policy = field_policy("ollama", OllamaDepth)
mistralrs_autotune_policy = field_policy("mistralrs-autotune", MistralrsAutotune)
