"""Tutorial 4: policy learning with Gymnasium: a bandit, an SB3 agent, a per-cycle policy, and OPE."""

import gymnasium as gym
import numpy as np

import specpolicy  # noqa: F401  (registers specpolicy/BlockSize-v0 and specpolicy/BlockSizeStep-v0)
from specpolicy.evaluation.ope import epsilon_greedy_log, estimate
from specpolicy.registry import create_policy

# The zoo ships replay sweeps of ShareGPT's training split (split="train", the default) and of its
# held-out prompts (split="test"): agents train on the first, with nothing to sweep.

# 1. An epsilon-greedy contextual bandit with one ridge regression per arm on compact features.
env = gym.make("specpolicy/BlockSize-v0", split="train", features="compact")
k, d = env.action_space.n, env.observation_space.shape[0]
A, b = np.stack([np.eye(d)] * k), np.zeros((k, d))
rng = np.random.default_rng(0)
obs, _ = env.reset(seed=0)
for _ in range(2000):
    estimates = [np.linalg.solve(A[a], b[a]) @ obs for a in range(k)]
    action = int(rng.integers(k)) if rng.random() < 0.1 else int(np.argmax(estimates))
    _, reward, _, _, _ = env.step(action)
    A[action] += np.outer(obs, obs)
    b[action] += reward * obs
    obs, _ = env.reset()
print("bandit arm values:", [round(float(np.linalg.solve(A[a], b[a]) @ obs), 3) for a in range(k)])

# 2. A stable-baselines3 agent on the same env, and SB3's evaluation of a specpolicy policy.
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402

model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, seed=0, device="cpu").learn(total_timesteps=256)
print("PPO mean tau:", evaluate_policy(model, Monitor(env), n_eval_episodes=20)[0])
fixed = gym.make("specpolicy/BlockSize-v0", split="train")
fixed16 = create_policy("fixed16", fixed.unwrapped.candidates)  # actions index the env's candidates
print("fixed16 mean tau:", evaluate_policy(fixed16, Monitor(fixed), n_eval_episodes=20)[0])

# 3. A per-cycle policy on BlockSizeStep-v0: the heuristic schedule, acting through the env.
step_env = gym.make("specpolicy/BlockSizeStep-v0", split="train")
obs, info = step_env.reset(seed=0)
size, total, done = 16, 0.0, False
candidates = step_env.unwrapped.candidates
while not done:
    obs, reward, done, _, info = step_env.step(candidates.index(size))
    total += reward
    wanted = size + 2 if info["accepted"] == size - 1 else size - 1
    size = min(candidates, key=lambda c: (abs(c - wanted), c))  # the nearest block size the sweep has
print(f"heuristic episode: {total:.0f} tokens, tau {info['tau']:.2f}")

# 4. Off-policy evaluation: log epsilon-greedy around fixed16, value the oracle-agreeing policy offline.
data = fixed.unwrapped.source
base = np.full(len(data.prompt_ids), candidates.index(16))
log = epsilon_greedy_log(data.observations, data.rewards, base, epsilon=0.3, seed=0)
target = data.rewards.argmax(axis=1)  # the (undeployable) oracle as the policy to value
for name, (value, low, high) in estimate(log, target, n_bootstrap=200).items():
    print(f"{name}: {value:.3f} [{low:.3f}, {high:.3f}]  (true {data.rewards.max(axis=1).mean():.3f})")
