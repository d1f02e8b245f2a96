"""Tutorial 9: an RL agent picks B, looks at the drafted block, then picks L (DraftVerifyStep-v0 + PPO)."""

import numpy as np
import torch
from common import SAMPLES, WORKDIR
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from specpolicy.data.registry import load_prompts
from specpolicy.envs import AgentPolicy, AgentSpec, save_agent
from specpolicy.envs.draft_verify_step import DraftVerifyStepEnv
from specpolicy.evaluation.metrics import summarize
from specpolicy.evaluation.replay import evaluate_replay, prompt_observation
from specpolicy.registry import create_policy
from specpolicy.sweep.run import run_sweep
from specpolicy.sweep.settings import SweepSettings

torch.set_num_threads(1)
CANDIDATES = [1, 2, 4, 8, 12, 16, 24, 32]
STEPS = 30_000 * SAMPLES  # 1.44M environment steps at the default size: about 15 minutes here


def verify_sweep(dataset: str, prompts: int, folder: str):
    """A replay sweep the environment can step: every anchor a cut block reaches, with confidences."""
    settings = SweepSettings(dataset=dataset, max_samples=prompts, candidates=CANDIDATES, verify_lengths=True,
                             confidence_sizes=[b for b in CANDIDATES if b > 1])
    return run_sweep(settings, str(WORKDIR / folder), load_prompts(dataset, prompts))


# 1. Train on ShareGPT's training split, test on the held-out prompts (tutorial 8's sweep, reused).
train = verify_sweep("sharegpt-train", SAMPLES, "sweep-verify-train")
test = verify_sweep("sharegpt", max(3, SAMPLES // 2), "sweep-verify")
print(f"train: {len(train.done_ids())} prompts, test: {len(test.done_ids())} held-out prompts")

# 2. Two steps per cycle: the action picks B, the drafter drafts, the next observation carries the block's
#    confidences, the action picks L. reward="saved": tokens committed minus the cycle's modelled cost in
#    plain-decoding steps, so an episode's return is the AR steps the decode saved.
envs = make_vec_env(DraftVerifyStepEnv, n_envs=8, seed=0, env_kwargs={"sweep": train.path, "reward": "saved"})
print(f"observation {envs.observation_space.shape}, actions {envs.action_space}")
model = PPO("MlpPolicy", envs, n_steps=256, batch_size=512, gamma=0.95, ent_coef=0.01, seed=0)


def training_speedup(model, env) -> float:
    """Pooled modelled speedup over AR of the greedy agent on every training prompt (AR time: tokens x AR
    step)."""
    seconds = tokens = 0.0
    for index, table in enumerate(env.source.tables):
        observation, _ = env.reset(options={"prompt_index": index})
        done = False
        while not done:
            observation, _, done, _, _ = env.step(model.predict(observation, deterministic=True)[0])
        seconds += env.source.latency.cycles_seconds(env.session.cycles)
        tokens += table.tokens()
    return tokens * env.source.latency.ar_seconds / seconds


probe, curve = DraftVerifyStepEnv(sweep=train.path), []
for _ in range(10):  # train in tenths, measuring the greedy agent after each
    model.learn(STEPS // 10, reset_num_timesteps=False)
    curve.append((model.num_timesteps, training_speedup(model, probe)))
print("training prompts, greedy agent:", " ".join(f"{speed:.2f}x" for _, speed in curve))

# 3. The trained network as a specpolicy policy: it rebuilds the observation from any decode's state.
spec = AgentSpec("draft_verify", CANDIDATES, budget=test.meta["max_new_tokens"])
agent = AgentPolicy(lambda obs: model.predict(obs, deterministic=True)[0], spec, name="draft-verify-agent")
save_agent(model, WORKDIR / "ppo-agent", spec=agent.spec)  # then: --policies agent:<WORKDIR>/ppo-agent
policies = [create_policy(name, CANDIDATES) for name in ("fixed16", "adaptive", "adaptive-verify")]
results = evaluate_replay(test, [*policies, agent, create_policy("oracle-verify", CANDIDATES)])
print(f"\nheld-out prompts, modelled "
      f"time\n{'policy':<20}{'over AR':>8}{'vs fixed16':>11}{'95% CI':>12}{'gain':>6}")
for row in summarize(results, baseline="fixed16", oracle="oracle-verify"):
    low, high = row.vs_baseline_ci95
    print(f"{row.policy:<20}{row.speedup:>7.2f}x{row.vs_baseline:>10.2f}x{low:>6.2f}-{high:<5.2f}"
          f"{row.gain_share:>6.2f}")

# 4. What it learned: the block sizes it drafts and how much of each block it verifies.
cycles = []
for record in test.records():
    observation = prompt_observation(test, record)
    cycles += record.table().simulate(agent.plan(observation))
sizes = np.array([c.block_size for c in cycles])
drafted = np.array([(c.verify_length, c.block_size) for c in cycles if c.block_size > 1])
summary = f"\nagent: B = 1 on {np.mean(sizes == 1):.0%} of cycles"
if len(drafted):
    summary += (f"; drafted blocks: median B {np.median(drafted[:, 1]):.0f}, median L "
                f"{np.median(drafted[:, 0]):.0f}, "
                f"L < B on {np.mean(drafted[:, 0] < drafted[:, 1]):.0%}")
print(summary)

# 5. The learning curve.
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(*zip(*curve), marker="o")
ax.axhline(1.0, color="0.5", linewidth=1, linestyle="--")
ax.set_xlabel("environment steps")
ax.set_ylabel("pooled speedup over AR (modelled)")
ax.set_title("PPO on DraftVerifyStep-v0: the greedy agent on the training prompts")
fig.tight_layout()
fig.savefig(WORKDIR / "ppo-draft-verify.png", dpi=120)
print(f"learning curve: {WORKDIR / 'ppo-draft-verify.png'}")
