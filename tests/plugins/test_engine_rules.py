"""The engines' own rules, table-driven on hand-built replay tables whose cycles are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from specpolicy.checks import check_policy
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.decoding.engine import decode
from specpolicy.plugins.engine_rules import TrtllmSchedule
from specpolicy.policy import PromptObservation
from specpolicy.registry import create_policy
from specpolicy.replay.table import ReplayTable
from specpolicy.state import DecodeState, DraftedBlock

CANDIDATES = (1, 4)


def _table(accepted_at_4: int, confidences: list[list[float]] | None = None) -> ReplayTable:
    """A prompt of 2 tokens and an output of 9 (no stop token): every anchor of B = 4 accepts
    ``accepted_at_4``."""
    accepted = np.array([[0, accepted_at_4]] * 9, dtype=np.int16)
    rows = {4: np.array(confidences, dtype=np.float32)} if confidences else {}
    return ReplayTable(2, 9, CANDIDATES, accepted, list(range(10, 25)), (), 100, rows)


def _run(policy, table: ReplayTable, concurrency: int = 1):
    observation = PromptObservation(np.zeros(0, np.float32), 2, "p", concurrency=concurrency)
    return [(c.block_size, c.verify_length, c.accepted,
             c.committed) for c in table.simulate(policy.plan(observation))]


NAN = [float("nan")] * 3
CONFIDENCES = [[0.9, 0.4, 0.9], NAN, [0.6, 0.7, 0.8], NAN, [0.9] * 3, NAN, [0.3, 0.9, 0.9], [0.9] * 3, NAN]


@pytest.mark.parametrize(("name", "expected"), [
    # anchor 0: 0.4 < 0.5 ends the prefix at L = 2; anchor 2: all pass, L = 4; anchor 6: L = 1; anchor 7: the
    # budget
    ("llamacpp-pmin:p_min=0.5,n_max=3", [(4, 2, 1, 2), (4, 4, 3, 4), (4, 1, 0, 1), (4, 4, 3, 1)]),
    # the running product at anchor 2 (0.6 x 0.7 = 0.42) stops at L = 2 where llama.cpp's per-token rule did
    # not
    ("threshold:0.5", [(4, 2, 1, 2), (4, 2, 1, 2), (4, 4, 3, 4)]),
])
def test_llamacpp_pmin_verifies_up_to_the_first_draft_below_p_min(name, expected):
    table = _table(3, CONFIDENCES)
    assert _run(create_policy(name, CANDIDATES), table) == expected
    assert sum(row[3] for row in expected) == table.tokens()


@pytest.mark.parametrize(("batch", "draft_len"), [(1, 4), (4, 4), (5, 2), (8, 2), (9, 1), (32, 1), (33, 0)])
def test_trtllm_draft_len_schedule_as_the_engine_reads_it(batch, draft_len):
    """TensorRT-LLM's own table for {4: 4, 8: 2, 32: 1}: a key covers the batch sizes up to it, none past the
    last."""
    assert TrtllmSchedule(15, {4: 4, 8: 2, 32: 1}).draft_len(batch) == draft_len


def test_trtllm_schedule_runs_the_drafts_of_the_concurrency():
    policy = create_policy("trtllm-schedule:max_draft_len=3,draft_len_schedule=2:3/8:0", CANDIDATES)
    assert _run(policy, _table(3), concurrency=1) == [(4, 4, 3, 4), (4, 4, 3, 4)]
    # a draft length of 0: plain AR
    assert [row[0] for row in _run(policy, _table(3), concurrency=4)] == [1] * 8
    assert policy.choices() == {1, 4}


def test_trtllm_gate_switches_speculation_off_for_good_once_the_window_mean_falls_below_the_threshold():
    """Window 2, threshold 1.5 accepted drafts per iteration. Served in order: a prompt accepting 3 per cycle,
    one accepting 0 (window [3, 0]: mean 1.5, not below), another accepting 0 ([0, 0]: 0 < 1.5, off), then a
    good one, which now runs plain AR although it would draft well."""
    policy = create_policy("trtllm-schedule:max_draft_len=3,acceptance_rate_window_size=2,"
                           "acceptance_rate_threshold=1.5", CANDIDATES)
    sizes = [{row[0] for row in _run(policy, _table(accepted))} for accepted in (3, 0, 0, 3, 3)]
    assert sizes == [{4}, {4}, {4}, {1}, {1}]
    assert policy.choices() == {1, 4}


def test_vllm_dsd_is_the_vllm_config_of_its_parameters():
    policy = create_policy("vllm-dsd:num_speculative_tokens=3,"
                           "num_speculative_tokens_per_batch_size=1-2:3/3-8:1", CANDIDATES)
    state = DecodeState.after_prefill(np.zeros(0, np.float32), 2)
    for concurrency, verify in ((1, 4), (2, 4), (4, 2), (64, 2)):  # past the last range vLLM keeps its K
        plan = policy.plan(PromptObservation(np.zeros(0, np.float32), 2, concurrency=concurrency))
        state.batch = concurrency  # a step scheduling that many requests: vLLM keys K on it
        assert (plan.block_size, plan.verify_length(state, DraftedBlock(4))) == (4, verify)


@pytest.mark.parametrize("name", ["vllm-dsd:num_speculative_tokens=3", "trtllm-schedule:max_draft_len=3",
                                  "llamacpp-pmin:n_max=3"])
def test_engine_rules_honour_the_policy_contract_and_decode_losslessly_live(name, trained_pair):
    policy = create_policy(name, CANDIDATES)
    check_policy(policy)
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=20, stop_token_ids=[])
    trace = decode(decoder, [4, 7, 5, 9], policy)
    assert trace.output_ids == decoder.generate([4, 7, 5, 9], 1).output_ids
    assert {c.block_size for c in trace.cycles} <= policy.choices()


@pytest.mark.parametrize(("arg", "message"), [
    ("trtllm-schedule:window=4",
     "has no parameter 'window'; its parameters: max_draft_len, draft_len_schedule"),
    ("trtllm-schedule:draft_len_schedule=4", "KEY:VALUE pairs"),
    ("llamacpp-pmin:p_min=high", "p_min='high' does not parse"),
    ("llamacpp-pmin:p_min=1.5", "a probability\\) must be a finite number in \\[0, 1\\]"),
    ("vllm-dsd:num_speculative_tokens_per_batch_size=", "START-END:K ranges"),
    # reported by the audit (issue 48): each of these was taken
    ("llamacpp-pmin:n_max=3,n_max=7", "llamacpp-pmin: n_max is given twice"),
    ("llamacpp-pmin:n_max=1_5", "n_max='1_5' does not parse"),
    ("trtllm-schedule:draft_len_schedule=0:15", "draft_len_schedule: batch sizes start at 1, got 0"),
    ("trtllm-schedule:acceptance_rate_threshold=nan",
     r"acceptance_rate_threshold \(at least the engine's least\) must be a finite number >= 0, got nan"),
    ("trtllm-schedule:acceptance_rate_threshold=-1", r"acceptance_rate_threshold .* >= 0, got -1"),
    ("llamacpp-pmin:n_max=0", r"n_max .* must be an integer >= 1, got 0"),
    ("trtllm-schedule:draft_len_schedule=4:-2", "draft_len_schedule: drafts are >= 0, got -2"),
])
def test_bad_engine_arguments_name_the_parameters(arg, message):
    with pytest.raises(ValueError, match=message):
        create_policy(arg, CANDIDATES)


def _vllm_budget(confidences: list[float], draft_ms: float, verify_ms: np.ndarray) -> int:
    """vLLM's ``get_num_tokens`` for one request, transcribed: k = argmax (1 + top-k survival) / cost(k)."""
    scores = np.sort(np.cumprod(np.asarray(confidences, dtype=np.float64)))[::-1]
    accepted = np.concatenate(([1.0], 1.0 + np.cumsum(scores)))
    return int(np.argmax(accepted / (draft_ms + verify_ms[1 : len(confidences) + 2])))


@pytest.mark.parametrize("seed", range(20))
def test_vllm_adaptive_verifies_the_budget_vllm_computes_for_one_request(seed):
    from specpolicy.costs import uniform_costs

    rng = np.random.default_rng(seed)
    confidences = [round(float(c), 3) for c in rng.uniform(0.05, 1.0, 7)]
    costs = uniform_costs(range(1, 9), ar_seconds=0.01, per_token=float(rng.choice([0.0, 0.02, 0.1, 0.5])))
    verify = np.array([0.0, *(costs.verify_seconds[n] for n in range(1, 9))])
    policy = create_policy("vllm-adaptive:num_speculative_tokens=7", (1, 8))
    plan = policy.plan(PromptObservation(np.zeros(0, np.float32), 2, costs=costs))
    state = DecodeState.after_prefill(np.zeros(0, np.float32), 2)
    length = plan.verify_length(state, DraftedBlock(8, tuple(confidences)))
    assert plan.block_size == 8 and length == 1 + _vllm_budget(confidences, costs.draft_seconds[8], verify)


def test_llamacpp_pmin_defaults_are_the_servers():
    """llama.cpp 11434's defaults (common/common.h): n_max 3, p_min 0, so a block of 4 verified whole, with no
    confidences read; in the engine it runs as those flags."""
    from specpolicy.engines.llamacpp import Setting
    from specpolicy.evaluation.engine import deployable_settings

    policy = create_policy("llamacpp-pmin", CANDIDATES)
    assert (policy.choices(), policy.confidence_sizes(), deployable_settings(policy, 16)) == \
        ({4}, set(), [Setting(4)])
    assert _run(policy, _table(3)) == [(4, 4, 3, 4), (4, 4, 3, 4)]
    assert Setting(4).flags()[-7:-1] == ["--spec-draft-n-max", "3", "--spec-draft-n-min", "0",
                                         "--spec-draft-p-min", "0"]
    # its verify rule is a value the engine maps
    cut = create_policy("llamacpp-pmin:p_min=0.5,n_max=7", CANDIDATES)
    assert deployable_settings(cut, 16) == [Setting(8, 0.5)]


@pytest.mark.parametrize("name", ["oracle:x=1", "oracle-step:3", "oracle-tau16"])
def test_an_oracle_given_an_argument_refuses_it(name):
    """Reported: ``oracle:x=1`` ran and ignored its argument."""
    with pytest.raises(ValueError, match="an oracle takes no argument"):
        create_policy(name, CANDIDATES)


@pytest.mark.parametrize(("name", "message"), [
    ("adaptive", "no fixed setting to export; run it in the engine"),
    ("marginal16", "no fixed setting to export"),  # it read as a missing cost table
    ("threshold", "decides per cycle or sets verify lengths with a rule llama.cpp cannot run"),
])
def test_what_cannot_be_exported_to_llamacpp_says_why(name, message):
    from specpolicy.evaluation.engine import deployable_settings

    with pytest.raises(ValueError, match=message):
        deployable_settings(create_policy(name, [1, 4, 8, 16]), 16)


@pytest.mark.parametrize("name", ["vllm-dsd:num_speculative_tokens=99", "llamacpp-pmin:n_max=64",
                                  "vllm-adaptive:num_speculative_tokens=70",
                                  "trtllm-schedule:max_draft_len=64"])
def test_a_draft_count_past_the_largest_block_is_refused_naming_it(name):
    """Found by this stop's audit: ``vllm-dsd:num_speculative_tokens=99`` was refused only as "block size
    must be an integer in 1..64, got 100", naming neither the policy nor the parameter."""
    parameter = name.split(":")[1].split("=")[0]
    with pytest.raises(ValueError, match=f"{parameter} drafts at most 63 tokens"):
        create_policy(name, CANDIDATES)
