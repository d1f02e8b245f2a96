"""The built-in policy families, declared without importing them: factories are ``"module:function"`` strings,
so listing policies or building ``fixed16`` loads neither torch nor scikit-learn."""

from __future__ import annotations

from types import SimpleNamespace

from specpolicy.hookspecs import hookimpl

LEARNED = {"learned": True}
SKLEARN_KINDS = {"logreg": "logistic regression", "forest": "random forest", "knn": "k-nearest neighbours",
                 "gboost": "gradient boosting"}

FAMILIES: dict[str, list[tuple[str, str, dict]]] = {
    "fixed": [
        ("fixed", "fixed:fixed_policy", {"aliases": ("dflash",), "description": "always block size N "
                                                                                "(fixed16 = DFlash(16))"}),
        ("random", "fixed:random_policy", {"description": "uniform over the candidates, per prompt "
                                                          "(randomN: seed N)"}),
        ("choices", "fixed:choices_policy", {"description": "per prompt, the block size a JSON file "
                                                            "names for its id (choices:FILE, e.g. "
                                                            "authors_choices.json)"}),
    ],
    "heuristic": [("heuristic", "heuristic:heuristic_policy",
                   {"description": "per cycle: +2 after a fully accepted block, -1 otherwise"})],
    "cycle_rules": [
        ("grow", "cycle_rules:grow_policy", {"description": "per cycle: next larger B after a full "
                                                            "accept, shrink to fit after a poor block"}),
        ("adaptive", "cycle_rules:adaptive_policy", {"description": "per cycle, cost-aware: most "
                                                     "expected tokens/s under the machine's cost table"}),
    ],
    "cycle": [("cycle", "cycle_learned:cycle_policy", {
        **LEARNED, "untrained": "cycle_learned:untrained_cycle_policy",
        "description": "per cycle, learned: imitates the per-cycle time oracle (DAgger) on cycle history "
                       "(cycle:PATH for a trained one)"})],
    "oracle": [
        ("oracle", "oracle:time_oracle", {"description": "per prompt, the fastest candidate by modelled "
                                                         "time (an upper bound, not deployable)"}),
        ("oracle-tau", "oracle:tau_oracle", {"description": "per prompt, the candidate with the highest tau "
                                                            "(BlockPilot's label; not deployable)"}),
        ("oracle-step", "oracle:step_oracle", {"description": "per cycle, the fewest modelled "
                                               "seconds by exact dynamic programming (an upper bound)"}),
    ],
    "blockpilot": [
        ("blockpilot", "blockpilot:blockpilot_policy", {
            **LEARNED, "untrained": "blockpilot:untrained_blockpilot",
            "description": "BlockPilot MLP on the last-token logits (the shipped one reads their "
                           "softmax), trained for speed over the whole range (blockpilot:PATH for a "
                           "trained one)"}),
        ("blockpilot-paper", "blockpilot:blockpilot_paper_policy", {
            **LEARNED, "untrained": "blockpilot:untrained_blockpilot",
            "description": "the paper's BlockPilot: tau labels over 14..18 (blockpilot-paper:PATH)"}),
        ("blockpilot-guard", "blockpilot:guarded_policy", {
            "description": "BlockPilot picks the start, the cost-aware adaptive rule guards each cycle "
                                       "(the default)"}),
    ],
    "sklearn": [(kind, f"sklearn_baselines:{kind}_policy", {
        **LEARNED, "description": f"scikit-learn {text} on compact features + PCA of the logits "
                                  f"({kind}:PATH)"})
        for kind, text in SKLEARN_KINDS.items()],
    "verify": [
        ("threshold", "verify_rules:threshold_policy", {"description": "draft the largest B (or "
                                                                       "thresholdN); verify while the "
                                                                       "running drafter confidence >= "
                                                                       "0.3 (threshold:P)"}),
        ("marginal", "verify_rules:marginal_policy", {"description": "draft the largest B (or "
                                                                     "marginalN); verify the L with the "
                                                                     "most expected tokens per modelled "
                                                                     "second"}),
        ("adaptive-verify", "verify_rules:adaptive_verify_policy", {
            "description": "adaptive's block size per cycle, then marginal's verify length"}),
        ("oracle-verify", "verify_rules:verify_oracle", {
            "description": "per cycle, the (B, L) with the fewest modelled seconds (DP over a "
                                       "--verify-lengths replay)"}),
    ],
    "engines": [
        ("vllm-config", "specpolicy.replay.export:vllm_config_policy",
         {"description": "an exported vLLM speculative_config, run as vLLM runs it (vllm-config:FILE)"}),
        ("sglang-config", "specpolicy.replay.export:sglang_config_policy",
         {"description": "exported SGLang DFlash flags, run as SGLang runs them (sglang-config:FILE)"}),
        ("vllm-dsd", "engine_rules:vllm_dsd_policy", {
            "description": "vLLM dynamic SD: a block of N + 1, K verified per batch size "
                           "(vllm-dsd:num_speculative_tokens=15,...)"}),
        ("vllm-adaptive", "engine_rules:vllm_adaptive_policy", {
            "description": "vLLM's adaptive-verification budget on a DFlash block (vLLM runs it for "
                           "DSpark only): draft N + 1, verify the prefix with the most expected tokens "
                           "per modelled second"}),
        ("trtllm-schedule", "engine_rules:trtllm_schedule_policy", {
            "description": "TensorRT-LLM: draft length per batch size, speculation off for good below an "
                           "acceptance rate (trtllm-schedule:draft_len_schedule=4:4/8:2,...)"}),
        ("llamacpp-pmin", "engine_rules:llamacpp_pmin_policy", {
            "description": "llama.cpp's server: draft n_max + 1, verify up to the first draft below p_min "
                           "(llamacpp-pmin:n_max=3,p_min=0, its defaults)"}),
        ("dflash-mlx", "field_dflash_mlx:dflash_mlx_policy", {
            "description": "dflash-mlx's adaptive block: 4 after weak full blocks, back after a probe "
                           "as fast as 4"}),
        ("dflash-mlx-count", "field_dflash_mlx:dflash_mlx_count_policy", {
            "description": "dflash-mlx's adaptive block before its speed gate (count-gated)"}),
        ("sglang-adaptive", "field_controllers:sglang_adaptive_policy", {
            "description": "SGLang's adaptive steps: an EMA of accepted drafts per batch-size slot "
                           "(:candidate_steps=1/3/7,...)"}),
        ("sglang-dflash-verify", "field_controllers:sglang_dflash_verify_policy", {
            "description": "SGLang's DFlash verify length (#24596): the adaptive EMA picks 4, 8, 12 or 16 of "
                           "a 16-token draft"}),
        ("mistralrs-dflash", "field_controllers:mistralrs_dflash_policy", {
            "description": "mistral.rs's DFlash depth: 7 drafts at batches <= 2, one above"}),
        ("mistralrs-adaptive", "field_controllers:mistralrs_adaptive_policy", {
            "description": "mistral.rs v0.9.2's depth: an EMA of accepted drafts picks 3, 5 or 7 "
                           "drafts"}),
        ("mlx-vlm", "field_controllers:mlx_vlm_policy", {
            "description": "mlx-vlm's DFlash block: halve or -2 on weak rounds, +2 on strong ones, 4..16"}),
        ("ollama", "field_costed:ollama_policy", {
            "description": "ollama's DFlash depth: most expected tokens per measured cost, probes, "
                           "one state across requests"}),
        ("mistralrs-autotune", "field_costed:mistralrs_autotune_policy", {
            "description": "mistral.rs's autotuner: expected tokens per measured step second, a 3% "
                           "switch margin, probes"}),
        ("llamacpp-streak", "field_controllers:llamacpp_streak_policy", {
            "description": "llama.cpp #25726: 11 full drafts in a row add a draft, 11 short remove one"}),
        ("llamacpp-ema", "field_controllers:llamacpp_ema_policy", {
            "description": "llama.cpp forks' --spec-draft-adaptive: a censoring-aware EMA sizes drafts"}),
    ],
    "agent": [("agent", "specpolicy.envs.agent_store:agent_policy", {
        "description": "a saved RL agent trained on a specpolicy environment, over its own "
                                   "candidates (agent:FOLDER, from specpolicy.envs.save_agent)"})],
}
"""entry point -> its families: (name, factory as "module:function", register options)"""


def _qualified(target: str) -> str:
    """``"fixed:fixed_policy"`` -> ``"specpolicy.plugins.fixed:fixed_policy"`` (full paths pass through)."""
    return target if target.startswith("specpolicy.") else f"specpolicy.plugins.{target}"


def _plugin(entry: str) -> SimpleNamespace:
    """The entry-point object that registers ``FAMILIES[entry]``."""

    @hookimpl
    def register_policies(register) -> None:
        for name, factory, options in FAMILIES[entry]:
            untrained = options.get("untrained")
            register(name, _qualified(factory), **{**options, **({"untrained": _qualified(untrained)}
                                                                 if untrained else {})})

    return SimpleNamespace(register_policies=register_policies)


fixed, heuristic, cycle_rules, cycle, oracle, blockpilot, sklearn, verify, engines, agent = (
    _plugin(entry) for entry in FAMILIES)
