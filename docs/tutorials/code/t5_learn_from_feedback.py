"""Tutorial 5: agents that learn block sizes from feedback on the training split, tested on held-out prompts."""

import numpy as np
from common import SAMPLES
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

from specpolicy.envs.bandit import LinUCB
from specpolicy.envs.replay_data import default_sweep
from specpolicy.envs.sb3 import BlockSizeSB3VecEnv
from specpolicy.envs.vector import BlockSizeVectorEnv
from specpolicy.evaluate import evaluate_replay
from specpolicy.features import get_extractor
from specpolicy.metrics import summarize
from specpolicy.policy import Policy
from specpolicy.registry import create_policy
from specpolicy.sweep.store import SweepStore

FULL = SAMPLES >= 48  # the test suite runs a small budget
BANDIT_STEPS, PPO_STEPS = (600, 40_000) if FULL else (40, 2_048)

# 1. LinUCB: one ridge regression per block size, trained on the shipped training split (480 prompts)
#    from the reward of the block size it tried: minus the modelled decode time, in AR steps.
env = BlockSizeVectorEnv(num_envs=32, features="compact", reward="seconds", split="train")
bandit = LinUCB.for_env(env, alpha=0.2)
bandit.learn(env, steps=BANDIT_STEPS)

# 2. PPO (stable-baselines3) on the same split through the SB3 vector-env adapter.
vec = VecNormalize(BlockSizeSB3VecEnv(num_envs=64, features="compact", reward="seconds", split="train"), gamma=0.0)
vec.seed(0)
ppo = PPO("MlpPolicy", vec, n_steps=16, batch_size=256, gamma=0.0, seed=0, device="cpu")
ppo.learn(total_timesteps=PPO_STEPS)


class PPOPolicy(Policy):
    """The trained PPO actor as a per-prompt specpolicy policy (deterministic action)."""

    extract = staticmethod(get_extractor("compact"))

    def select(self, observation):
        features = self.extract(observation.logits[None], np.array([observation.prompt_length]))
        action, _ = ppo.predict(vec.normalize_obs(features.astype(np.float32)), deterministic=True)
        return self.candidates[int(action[0])]


# 3. Every policy on the 200 held-out prompts (never seen in training), priced by the same cost table;
#    the learned agents against the best fixed block size on these very prompts (chosen in hindsight).
store = SweepStore.load(default_sweep("test"))
candidates = env.candidates
fixed = [create_policy(f"fixed{b}", candidates) for b in candidates]
learned = bandit.policy()
learned.name = "linucb"
actor = PPOPolicy(candidates)
actor.name = "ppo"
results = evaluate_replay(store, [*fixed, learned, actor, create_policy("oracle", candidates)])
rows = summarize(results, baseline="fixed8", n_bootstrap=2000)
best = max(rows[: len(fixed)], key=lambda row: row.speedup).policy  # the best fixed block size, in hindsight
rows = summarize(results, baseline=best, n_bootstrap=2000)
print(f"held-out prompts: {len(store.done_ids())}; bandit steps: {BANDIT_STEPS} x 32; PPO steps: {PPO_STEPS}")
print(f"{'policy':10} {'speedup':>8} {'vs ' + best:>10} {'95% CI':>12} {'tau':>6} {'gain':>6}")
for row in rows:
    r = row.table_row()
    if r["policy"] in ("fixed1", "fixed16", best, "linucb", "ppo", "oracle"):
        ratio = r["vs " + best]
        print(f"{r['policy']:10} {r['speedup']:>8} {ratio:>10} {r['95% CI']:>12} {r['tau']:>6} {r['gain']:>6}")
