"""Off-policy evaluation of block-size policies from logged bandit data (action, propensity, reward per
prompt): IPS, self-normalised IPS and doubly robust values of a deterministic policy, bootstrap 95% CIs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specpolicy.arguments import check_real
from specpolicy.defaults import OPE_BOOTSTRAP_RESAMPLES


@dataclass
class BanditLog:
    """Logged interactions: observations [n, d], actions [n], propensities [n], rewards [n]."""

    observations: np.ndarray
    actions: np.ndarray
    propensities: np.ndarray
    rewards: np.ndarray
    num_actions: int


def epsilon_greedy_log(observations: np.ndarray, rewards: np.ndarray, base_actions: np.ndarray,
                       epsilon: float, seed: int = 0) -> BanditLog:
    """Log one interaction per row of ``observations`` [n, d]: ``base_actions`` [n] with prob 1 - eps + eps/K,
    any other with eps/K; ``rewards`` [n, K]: what every action would get."""
    check_real(epsilon, "epsilon (the share of rows logged at random)", 0, 1)
    rng = np.random.default_rng(seed)
    n, k = rewards.shape
    explore = rng.random(n) < epsilon
    actions = np.where(explore, rng.integers(k, size=n), base_actions)
    propensities = np.where(actions == base_actions, 1 - epsilon + epsilon / k, epsilon / k)
    return BanditLog(observations, actions, propensities, rewards[np.arange(n), actions], k)


def _reward_model(log: BanditLog) -> np.ndarray:
    """Per-action mean logged reward (a simple direct-method model): [K]."""
    means = np.full(log.num_actions, log.rewards.mean())
    for a in range(log.num_actions):
        if np.any(log.actions == a):
            means[a] = log.rewards[log.actions == a].mean()
    return means


def ips(log: BanditLog, target_actions: np.ndarray) -> float:
    """Inverse propensity scoring."""
    weights = (log.actions == target_actions) / log.propensities
    return float(np.mean(weights * log.rewards))


def snips(log: BanditLog, target_actions: np.ndarray) -> float:
    """Self-normalised IPS."""
    weights = (log.actions == target_actions) / log.propensities
    return float(np.sum(weights * log.rewards) / max(np.sum(weights), 1e-12))


def doubly_robust(log: BanditLog, target_actions: np.ndarray) -> float:
    """Doubly robust: direct-method prediction plus an importance-weighted correction."""
    q = _reward_model(log)
    weights = (log.actions == target_actions) / log.propensities
    return float(np.mean(q[target_actions] + weights * (log.rewards - q[log.actions])))


ESTIMATORS: dict[str, Callable[[BanditLog, np.ndarray], float]] = {"ips": ips, "snips": snips,
                                                                     "dr": doubly_robust}


def _subset(log: BanditLog, rows: np.ndarray) -> BanditLog:
    return BanditLog(log.observations[rows], log.actions[rows], log.propensities[rows], log.rewards[rows],
                     log.num_actions)


def estimate(log: BanditLog, target_actions: np.ndarray, n_bootstrap: int = OPE_BOOTSTRAP_RESAMPLES,
             seed: int = 0) -> dict:
    """Each estimator's value and bootstrap 95% interval over logged rows: ``{name: (value, low, high)}``."""
    from scipy import stats

    rows = np.arange(len(log.actions))
    out = {}
    for name, estimator in ESTIMATORS.items():
        def statistic(index: np.ndarray, estimator=estimator) -> float:
            index = index.astype(np.int64)
            return estimator(_subset(log, index), target_actions[index])

        result = stats.bootstrap((rows,), statistic, vectorized=False, n_resamples=n_bootstrap,
                                 confidence_level=0.95, method="percentile", random_state=seed)
        low, high = result.confidence_interval
        out[name] = (estimator(log, target_actions), float(low), float(high))
    return out
