"""A contextual bandit for ``BlockSize-v0``: disjoint LinUCB over standardised prefill features, a
:class:`~specpolicy.policy.Policy` (``agent = LinUCB.for_env(env); agent.learn(env, n); agent.policy()``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from specpolicy.defaults import LINUCB_ALPHA
from specpolicy.envs.agent_policy import AgentPolicy, AgentSpec
from specpolicy.envs.block_size_step import BlockSizeStepEnv
from specpolicy.envs.vector import BlockSizeVectorEnv
from specpolicy.files import atomic_path, write_text


class LinUCB:
    """One ridge regression per arm; picks argmax of mean + ``alpha`` x width. Rewards are per token of the
    prompt, so long prompts do not drown short ones."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, candidates: tuple[int, ...], features: str,
                 alpha: float = LINUCB_ALPHA, ridge: float = 1.0) -> None:
        self.mean, self.scale, self.candidates, self.features = mean, scale, candidates, features
        dim = len(mean) + 1
        self.A = np.stack([np.eye(dim) * ridge for _ in candidates])  # [arms, d, d]
        self.b = np.zeros((len(candidates), dim))  # [arms, d]
        self.alpha = alpha

    @classmethod
    def for_env(cls, env: BlockSizeVectorEnv, alpha: float = LINUCB_ALPHA) -> LinUCB:
        obs = env.source.observations
        return cls(obs.mean(0), obs.std(0) + 1e-6, env.candidates, env.features, alpha)

    def design(self, observations: np.ndarray) -> np.ndarray:
        """Standardised features plus a bias column: [n, d + 1]."""
        return np.concatenate([(observations - self.mean) / self.scale, np.ones((len(observations), 1))],
                              axis=1)

    def scores(self, x: np.ndarray, explore: bool = True) -> np.ndarray:
        """Per-arm scores [n, arms] for design rows ``x`` [n, d + 1]."""
        inverse = np.linalg.inv(self.A)
        theta = np.einsum("aij,aj->ai", inverse, self.b)
        scores = x @ theta.T
        if explore:
            scores = scores + self.alpha * np.sqrt(np.einsum("ni,aij,nj->na", x, inverse, x))
        return scores

    def learn(self, env: BlockSizeVectorEnv, steps: int, seed: int = 0) -> None:
        """``steps`` vector steps of ``env.num_envs`` prompts, updating on each tried arm's reward."""
        tokens = np.array([max(1, t.tokens()) if t is not None else 1 for t in env.source.tables],
                          dtype=np.float64)
        obs, _ = env.reset(seed=seed)
        for _ in range(steps):
            prompts, x = env.prompt_indices().copy(), self.design(obs)
            actions = self.scores(x).argmax(axis=1)
            obs, rewards, *_ = env.step(actions)
            for row, arm, reward in zip(x, actions, rewards / tokens[prompts]):
                self.A[arm] += np.outer(row, row)
                self.b[arm] += reward * row

    def learn_cycles(self, env: BlockSizeStepEnv, episodes: int, seed: int = 0) -> int:
        """Per-cycle learning on ``BlockSizeStep-v0`` with ``reward="time"`` (myopic); returns the steps."""
        if env.reward != "time":
            raise ValueError("per-cycle bandit learning needs BlockSizeStep-v0 with reward='time'")
        scale, steps = env.source.latency.ar_seconds, 0
        obs, _ = env.reset(seed=seed)
        for _ in range(episodes):
            done = False
            while not done:
                x = self.design(obs[None])
                arm = int(self.scores(x).argmax())
                obs, reward, done, _, _ = env.step(arm)
                self.A[arm] += np.outer(x[0], x[0])
                self.b[arm] += reward * scale * x[0]
                steps += 1
            obs, _ = env.reset()
        return steps

    def act(self, observation: np.ndarray) -> int:
        """The greedy arm (no exploration bonus) for one observation [d]: what a deployed agent does."""
        return int(self.scores(self.design(np.asarray(observation)[None]), explore=False).argmax())

    def policy(self) -> AgentPolicy:
        """The per-prompt agent as a policy."""
        return AgentPolicy(self.act, AgentSpec("prompt", self.candidates, self.features), name="linucb")

    def cycle_policy(self, budget: int) -> AgentPolicy:
        """The per-cycle agent as a per-cycle policy; ``budget``: the decodes' max_new_tokens."""
        return AgentPolicy(self.act, AgentSpec("cycle", self.candidates, budget=budget), name="linucb-cycle")

    def save(self, path: str | Path) -> None:
        """Arrays in ``linucb.npz`` (no pickle), settings in ``linucb.json``, into the folder ``path``."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / "linucb.npz") as tmp, open(tmp, "wb") as handle:
            np.savez(handle, mean=self.mean, scale=self.scale, A=self.A, b=self.b)
        settings = {"candidates": list(self.candidates), "features": self.features, "alpha": self.alpha}
        write_text(folder / "linucb.json", json.dumps(settings, indent=2))

    @classmethod
    def load(cls, path: str | Path) -> LinUCB:
        folder = Path(path)
        settings = json.loads((folder / "linucb.json").read_text())
        with np.load(folder / "linucb.npz", allow_pickle=False) as arrays:
            agent = cls(arrays["mean"], arrays["scale"], tuple(settings["candidates"]), settings["features"],
                        settings["alpha"])
            agent.A, agent.b = arrays["A"], arrays["b"]
        return agent
