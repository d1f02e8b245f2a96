"""Tutorial 6: agents that learn block sizes from feedback on the training split, tested on held-out
prompts."""

import gymnasium as gym
import numpy as np
from common import SAMPLES
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

import specpolicy  # noqa: F401  (registers the environments)
from specpolicy.envs.bandit import LinUCB
from specpolicy.envs.replay_data import shipped_sweep
from specpolicy.envs.sb3 import BlockSizeSB3VecEnv
from specpolicy.envs.vector import BlockSizeVectorEnv
from specpolicy.evaluation.metrics import summarize
from specpolicy.evaluation.replay import evaluate_replay
from specpolicy.features import get_extractor
from specpolicy.policy import Policy
from specpolicy.registry import create_policy

FULL = SAMPLES >= 48  # the test suite runs a small budget
BANDIT_STEPS, PPO_STEPS, CYCLE_EPISODES = (600, 40_000, 1500) if FULL else (40, 2_048, 30)

# 1. LinUCB: one ridge regression per block size, trained on the shipped training split (480 prompts)
#    from the reward of the block size it tried: minus the modelled decode time, in AR steps.
env = BlockSizeVectorEnv(num_envs=32, features="compact", reward="seconds", split="train")
bandit = LinUCB.for_env(env, alpha=0.2)
bandit.learn(env, steps=BANDIT_STEPS)

# 2. PPO (stable-baselines3) on the same split through the SB3 vector-env adapter.
vec = VecNormalize(BlockSizeSB3VecEnv(num_envs=64, features="compact", reward="seconds", split="train"),
                   gamma=0.0)
vec.seed(0)
ppo = PPO("MlpPolicy", vec, n_steps=16, batch_size=256, gamma=0.0, seed=0, device="cpu")
ppo.learn(total_timesteps=PPO_STEPS)


# 3. Per cycle: LinUCB on BlockSizeStep-v0, choosing B before every cycle from the decode state (last
#    accepted lengths, budget used, prefill features); reward: tokens per modelled second of the cycle.
step_env = gym.make("specpolicy/BlockSizeStep-v0", reward="time").unwrapped  # the train split
cycle_agent = LinUCB(np.zeros(step_env.observation_space.shape[0]),
                     np.ones(step_env.observation_space.shape[0]),
                     step_env.candidates, "compact", alpha=0.2)
cycle_agent.learn_cycles(step_env, episodes=CYCLE_EPISODES)


class PPOPolicy(Policy):
    """The trained PPO actor as a per-prompt specpolicy policy (deterministic action)."""

    extract = staticmethod(get_extractor("compact"))

    def select(self, observation):
        features = self.extract(observation.logits[None], np.array([observation.prompt_length]))
        action, _ = ppo.predict(vec.normalize_obs(features.astype(np.float32)), deterministic=True)
        return self.candidates[int(action[0])]


# 4. Every policy on the 200 held-out prompts (never seen in training), priced by the same cost table;
#    the learned agents against the best fixed block size on these very prompts (chosen in hindsight).
store = shipped_sweep("test")
candidates = env.candidates
fixed = [create_policy(f"fixed{b}", candidates) for b in candidates]
learned = bandit.policy()
learned.name = "linucb"
actor = PPOPolicy(candidates)
actor.name = "ppo"
per_cycle = cycle_agent.cycle_policy(budget=int(store.meta["max_new_tokens"]))
rules = [create_policy(name, candidates) for name in ("adaptive", "oracle-step")]
results = evaluate_replay(store,
                          [*fixed, learned, actor, create_policy("oracle", candidates), per_cycle, *rules])
rows = summarize(results, baseline="fixed8", n_bootstrap=2000)
best = max(rows[: len(fixed)], key=lambda row: row.speedup).policy  # the best fixed block size, in hindsight
rows = summarize(results, baseline=best, n_bootstrap=2000)
print(f"held-out prompts: {len(store.done_ids())}; bandit steps: {BANDIT_STEPS} x 32; PPO steps: "
      f"{PPO_STEPS}; "
      f"per-cycle episodes: {CYCLE_EPISODES}")
print(f"{'policy':12} {'speedup':>8} {'vs ' + best:>10} {'95% CI':>12} {'tau':>6} {'gain':>6}")
for row in rows:
    r = row.table_row()
    if r["policy"] in ("fixed1", "fixed16", best, "linucb", "ppo", "oracle", "linucb-cycle", "adaptive",
                       "oracle-step"):
        ratio = r["vs " + best]
        print(f"{r['policy']:12} {r['speedup']:>8} {ratio:>10} {r['95% CI']:>12} {r['tau']:>6} "
              f"{r['gain']:>6}")
