"""The built-in policy families, declared without importing them.

Each object here is one entry point of the ``specpolicy`` group (``fixed = "specpolicy.plugins.catalog:fixed"``
in pyproject.toml): a pluggy plugin whose ``register_policies`` names each family's factory as a
``"module:function"`` string, as Gymnasium's ``entry_point`` does. The registry imports that module
when the family is first built, so listing policies or building ``fixed16`` loads neither torch nor
scikit-learn. A third-party plugin may register a callable or a string alike.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from specpolicy.hookspecs import hookimpl

_HERE = "specpolicy.plugins"


def _plugin(declare: Callable) -> SimpleNamespace:
    """An entry-point object whose ``register_policies`` hook is ``declare``."""
    return SimpleNamespace(register_policies=hookimpl(declare))


def _fixed(register) -> None:
    register("fixed", f"{_HERE}.fixed:fixed_policy", aliases=("dflash",),
             description="always block size N (fixed16 = DFlash(16))")
    register("random", f"{_HERE}.fixed:random_policy",
             description="uniform over the candidates, per prompt (randomN: seed N)")


def _heuristic(register) -> None:
    register("heuristic", f"{_HERE}.heuristic:heuristic_policy", per_step=True,
             description="per cycle: +2 after a fully accepted block, -1 otherwise")


def _cycle_rules(register) -> None:
    rules = f"{_HERE}.cycle_rules"
    register("probe", f"{rules}:probe_policy", per_step=True,
             description="per cycle: speculate at N (16); after < 2 accepted, plain AR for 16, 32, 64 cycles")
    register("grow", f"{rules}:grow_policy", per_step=True,
             description="per cycle: next larger B after a full accept, shrink to fit after a poor block")
    register("adaptive", f"{rules}:adaptive_policy", per_step=True,
             description="per cycle, cost-aware: most expected tokens/s under the machine's cost table")


def _cycle(register) -> None:
    register("cycle", f"{_HERE}.cycle_learned:cycle_policy", per_step=True, learned=True,
             untrained=f"{_HERE}.cycle_learned:untrained_cycle_policy",
             description="per cycle, learned: imitates the per-cycle time oracle (DAgger) on cycle history "
                         "(cycle:PATH for a trained one)")


def _oracle(register) -> None:
    register("oracle", f"{_HERE}.oracle:time_oracle",
             description="per prompt, the fastest candidate by modelled time (an upper bound, not deployable)")
    register("oracle-tau", f"{_HERE}.oracle:tau_oracle",
             description="per prompt, the candidate with the highest tau (BlockPilot's label; not deployable)")
    register("oracle-step", f"{_HERE}.oracle:step_oracle", per_step=True,
             description="per cycle, the fewest modelled seconds by exact dynamic programming (an upper bound)")


def _blockpilot(register) -> None:
    module = f"{_HERE}.blockpilot"
    register("blockpilot", f"{module}:blockpilot_policy", learned=True, untrained=f"{module}:untrained_blockpilot",
             description="BlockPilot MLP on the raw last-token logits, trained for speed over the whole range "
                         "(blockpilot:PATH for a trained one)")
    register("blockpilot-paper", f"{module}:blockpilot_paper_policy", learned=True,
             untrained=f"{module}:untrained_blockpilot",
             description="the paper's BlockPilot: tau labels over 14..18 (blockpilot-paper:PATH)")
    register("blockpilot-guard", f"{module}:guarded_policy", per_step=True,
             description="BlockPilot picks the start, the cost-aware adaptive rule guards each cycle (the default)")


SKLEARN_KINDS = {"logreg": "logistic regression", "forest": "random forest", "knn": "k-nearest neighbours",
                 "gboost": "gradient boosting"}


def _sklearn(register) -> None:
    for kind, text in SKLEARN_KINDS.items():
        register(kind, f"{_HERE}.sklearn_baselines:{kind}_policy", learned=True,
                 description=f"scikit-learn {text} on compact features + PCA of the logits ({kind}:PATH)")


def _verify(register) -> None:
    rules = f"{_HERE}.verify_rules"
    register("threshold", f"{rules}:threshold_policy",
             description="draft the largest B (or thresholdN); verify while the running drafter confidence >= 0.3 "
                         "(threshold:P)")
    register("marginal", f"{rules}:marginal_policy",
             description="draft the largest B (or marginalN); verify the L with the most expected "
                         "tokens per modelled second (cost-aware)")
    register("adaptive-verify", f"{rules}:adaptive_verify_policy", per_step=True,
             description="adaptive's block size per cycle, then marginal's verify length")
    register("oracle-verify", f"{rules}:verify_oracle", per_step=True,
             description="per cycle, the (B, L) with the fewest modelled seconds (DP over a --verify-lengths replay)")


def _verify_learned(register) -> None:
    register("verify-head", f"{_HERE}.verify_learned:verify_head_policy", per_step=True, learned=True,
             untrained=f"{_HERE}.verify_learned:untrained_verify_head",
             description="adaptive's B, then the L with the most expected tokens per second under a learned "
                         "calibration of the drafter's confidences (verify-head:FOLDER)")


def _agent(register) -> None:
    register("agent", "specpolicy.envs.agent_store:agent_policy", per_step=True,
             description="a saved RL agent trained on a specpolicy environment, over its own candidates "
                         "(agent:FOLDER, from specpolicy.envs.save_agent)")


fixed = _plugin(_fixed)
heuristic = _plugin(_heuristic)
cycle_rules = _plugin(_cycle_rules)
cycle = _plugin(_cycle)
oracle = _plugin(_oracle)
blockpilot = _plugin(_blockpilot)
sklearn = _plugin(_sklearn)
verify = _plugin(_verify)
verify_learned = _plugin(_verify_learned)
agent = _plugin(_agent)
