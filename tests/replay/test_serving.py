"""Batch cost tables and the serving simulation: exact small cases, and agreement with batch-1 replay."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from specpolicy.costs import uniform_costs
from specpolicy.cycles import Plan
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.defaults import BATCH_DRAFT_MARGIN
from specpolicy.policy import PromptObservation
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.replay.serving import simulate_serving
from specpolicy.sweep.replay import build_replay
from specpolicy.zoo import ZOO_DIR

LENGTHS = (1, 2, 4, 8, 16)


def linear_table(batches=(1, 2, 4), fixed=1.0, per_token=0.1, draft_fixed=0.5, draft_per_token=0.01):
    """seconds = fixed + per_token x total tokens, at every batch size (a table a test can price by hand)."""
    return BatchCostTable(
        verify={b: {n: fixed + per_token * b * n for n in LENGTHS} for b in batches},
        draft={b: {n: draft_fixed + draft_per_token * b * n for n in LENGTHS if n > 1} for b in batches},
    )


def test_ragged_steps_interpolate_along_total_tokens():
    table = linear_table()
    assert table.verify_cost([4, 4]) == pytest.approx(1.0 + 0.1 * 8)
    assert table.verify_cost([1, 7]) == pytest.approx(1.0 + 0.1 * 8)  # ragged: total tokens, same batch
    assert table.verify_cost([3, 3, 3]) == pytest.approx(1.0 + 0.1 * 9)  # batch 3 between measured 2 and 4
    assert table.draft_cost([1, 1]) == 0.0 and table.draft_cost([1, 8]) == pytest.approx(0.5 + 0.08)
    assert table.step_seconds([(8, 3), (1, 1)]) == pytest.approx(0.5 + 0.08 + 1.0 + 0.4)
    with pytest.raises(ValueError, match="up to 4"):
        table.verify_cost([1] * 5)


def test_a_chain_drafters_batch_drafts_as_long_as_its_longest_chain():
    """Issue 56 (drafters priced as they draft): a chain drafter (EAGLE, MTP) drafts one position per pass for
    the sequences still drafting, so a step whose blocks are 8, 2, 2 and 2 runs a pass at batch 4 and 6 more
    at batch 1, not the 3.5 passes at batch 4 a total of 14 tokens read as (a block drafter's one pass over
    ragged blocks is priced by their total, as before)."""
    heads = {b: 0.01 * (1 + b / 8) for b in (1, 2, 4)}  # one head pass at batch b
    chain = BatchCostTable(verify=linear_table().verify, drafter="chain",
                           draft={b: {n: (n - 1) * head for n in LENGTHS if n > 1} for b,
                                  head in heads.items()})
    assert chain.draft_cost([8, 2, 2, 2]) == pytest.approx(heads[4] + 6 * heads[1])
    assert chain.draft_cost([4, 4]) == pytest.approx(3 * heads[2])  # uniform blocks: as the table prices them
    assert chain.draft_cost([8, 1, 1, 1]) == pytest.approx(7 * heads[1])  # plain steps draft nothing
    assert linear_table().draft_cost([8, 2, 2, 2]) == pytest.approx(0.5 + 0.01 * 14)


def test_per_request_costs_at_a_concurrency_share_the_batched_pass():
    costs = linear_table().at_concurrency(4, [1, 4, 16])
    assert costs.verify_seconds[16] == pytest.approx((1.0 + 0.1 * 64) / 4)
    assert costs.ar_seconds == pytest.approx((1.0 + 0.4) / 4)
    assert costs.draft_seconds[4] == pytest.approx((0.5 + 0.16) / 4)


@pytest.mark.parametrize("concurrency", [0, -1, 2.5, "4", True])
def test_a_concurrency_that_is_not_a_count_is_refused_in_one_line(concurrency):
    """From Python, 0 was a ZeroDivisionError, -1 "a cost table needs positive finite seconds", 2.5 served as
    2 and labelled 2.5, "4" a TypeError."""
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        linear_table().at_concurrency(concurrency, [1, 4])
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):  # the simulation's own check
        simulate_serving([], [], linear_table(), concurrency)


def test_a_plain_step_in_a_batch_pays_its_share_of_the_drafter_pass_the_others_run():
    """Reported (engines page): at concurrency 4 the default backed off to plain steps that looked 19% cheaper
    than a B = 16 cycle, as if the whole batch stopped drafting; beside three requests that draft, a plain
    step costs its share of their drafter pass too. The reference (a server of plain AR requests) is
    unchanged."""
    # drafting pays here: at acceptance 0.5, B = 4 gives 1.875 tokens a cycle, 1.28x a plain batch's
    flat = linear_table(per_token=0.01, draft_fixed=0.2)
    costs = flat.at_concurrency(4, [1, 4, 16])
    # three requests at B = 4 (the smallest), me at 1
    others_draft = (0.2 + 0.01 * 3 * 4) + (1.0 + 0.01 * (3 * 4 + 1))
    assert costs.cycle_seconds(1) == pytest.approx(others_draft / 4)
    assert costs.draft_seconds[1] == 0.0 and costs.ar_seconds == pytest.approx((1.0 + 0.04) / 4)
    alone = flat.at_concurrency(1, [1, 4, 16])
    assert alone.cycle_seconds(1) == alone.ar_seconds == pytest.approx(1.01)  # no other request: a plain step


def test_where_no_block_pays_at_the_prior_acceptance_the_others_step_plainly_too():
    """Reported (a compute-bound CPU batch table, concurrency 8): pricing a plain step beside drafting
    requests made the policies draft where a batch of plain steps is faster (0.94x -> 0.88x AR). Where no
    block's expected tokens at the prior acceptance pay for its batched cycle, the others are taken to step
    plainly."""
    steep = linear_table()  # at c = 4 a batched cycle of B costs 1.5 + 0.44 B against 1.4 for plain steps
    costs = steep.at_concurrency(4, [1, 4, 16])
    assert costs.cycle_seconds(1) == costs.ar_seconds == pytest.approx((1.0 + 0.4) / 4)


def test_a_batch_drafts_only_where_a_block_pays_by_the_margin_at_the_prior_acceptance():
    """Issue 56 (the map at concurrency 256: the default 0.93x plain decoding): where a block pays for its
    batched cycle at the prior acceptance by a hair (2% on aiconfigurator's H200 vLLM Qwen3-8B table at 256),
    pricing a plain step beside drafting requests made every request draft; the others are taken to draft only
    where some block pays by :data:`BATCH_DRAFT_MARGIN`."""
    thin = linear_table(per_token=0.01)  # at c = 4, B = 4 at acceptance 0.5 pays 1.07x a plain batch
    assert 1.07 < 1 + BATCH_DRAFT_MARGIN < 1.28  # the premise: under the margin here, over it above
    costs = thin.at_concurrency(4, [1, 4, 16])
    assert costs.cycle_seconds(1) == costs.ar_seconds == pytest.approx((1.0 + 0.04) / 4)


def test_round_trip_and_wrong_kind(tmp_path):
    table = replace(linear_table(), prefill={64: 0.5, 1024: 2.0})
    table.save(tmp_path / "b.json")
    assert BatchCostTable.load(tmp_path / "b.json") == table
    assert table.prefill_seconds(544) == pytest.approx(1.25) and linear_table().prefill_seconds(544) == 0
    uniform_costs([1, 4]).save(tmp_path / "c.json")
    with pytest.raises(ValueError, match="bench batch-latency"):
        BatchCostTable.load(tmp_path / "c.json")


@pytest.fixture(scope="module")
def tables(trained_pair):
    decoder = SpeculativeDecoder(*trained_pair, max_new_tokens=30)
    prompts = ([4, 7, 5, 9], [8, 7, 9], [3, 3, 8])
    return [build_replay(decoder, p, [1, 4, 8], max_new_tokens=30)[0] for p in prompts]


def test_one_slot_serves_requests_one_after_another_as_batch_one_replay(tables):
    batch = linear_table()
    served = simulate_serving(tables, [lambda: Plan.fixed(8)] * 3, batch, 1)
    for i, table in enumerate(tables):
        cycles = table.simulate(8)
        assert served.tokens[i] == sum(c.committed for c in cycles) == table.tokens()
        assert served.seconds[i] == pytest.approx(sum(batch.step_seconds([(8, 8)]) for _ in cycles))
    assert served.total_seconds == pytest.approx(sum(served.seconds))


def test_concurrent_requests_share_steps_and_finish_with_the_same_tokens(tables):
    batch = linear_table()
    alone = simulate_serving(tables, [lambda: Plan.fixed(4)] * 3, batch, 1)
    together = simulate_serving(tables, [lambda: Plan.fixed(4)] * 3, batch, 3)
    assert together.tokens == alone.tokens
    assert together.total_seconds < alone.total_seconds  # one fixed cost per step instead of three
    assert together.total_seconds > sum(together.seconds)  # freed slots held by copies, paying their shares
    assert together.steps == max(len(t.simulate(4)) for t in tables)


class RecordedSteps(BatchCostTable):
    """A batch table that keeps every step's (B, L) per request."""

    def step_seconds(self, actions):
        self.__dict__.setdefault("steps", []).append(list(actions))
        return super().step_seconds(actions)


def test_every_step_holds_the_concurrency_until_the_last_request_finishes(tables):
    """Issue 56 (the map's RAG cells, SpecDecode-Bench under load): a cell labelled concurrency c served a
    finite set of requests, so its last steps drained: the 240-prompt map at 256 never held 256 requests, 46
    held-out CNN/DM requests "at 64" never held 64, and the requests that finish last (the low-acceptance
    group) ran alone, charged whole steps (the per-step oracle read 0.91x plain decoding on RAG at 256). A
    server at concurrency c holds c: freed slots take copies of the requests, in order, which count in the
    steps and the engine's pooled cycles but not in the results, until the last request finishes."""
    base = linear_table()
    batch = RecordedSteps(base.verify, base.draft)
    served = simulate_serving(tables, [lambda: Plan.fixed(4)] * 3, batch, 4)
    assert batch.steps and all(len(step) == 4 for step in batch.steps)
    assert served.tokens == [t.tokens() for t in tables]  # the copies' tokens are not the requests'
    assert served.cycles == [len(t.simulate(4)) for t in tables]
    full = base.step_seconds([(4, 4)] * 4) / 4  # every request pays a quarter of a full step, drain or not
    assert served.seconds == pytest.approx([cycles * full for cycles in served.cycles])
    assert served.steps == max(served.cycles) and len(served.records) == sum(served.cycles)


def test_under_a_chain_drafter_a_batch_drafts_one_block_from_the_engines_pooled_acceptance(tables):
    """Issue 56: a chain drafter's batch drafts as long as its longest chain, so the cost-aware rule
    (``adaptive``, the default's guard) gives every request of a step one block, chosen from the acceptance of
    every request's cycles (the engine's, pooled) and priced at the batch the step runs; a block drafter keeps
    per-request blocks. The serving simulation tells each request's state what the engine knows: the batch,
    its prices and the pooled cycles."""
    from specpolicy.registry import create_policy

    base = linear_table(batches=(1, 2, 3, 4), fixed=1.0, per_token=0.01)
    chain = RecordedSteps(base.verify,
                          {b: {n: (n - 1) * 0.02 for n in LENGTHS if n > 1} for b in base.verify},
                          drafter="chain")
    policy = create_policy("adaptive", [1, 4, 8])
    observation = PromptObservation(np.zeros(0, np.float32), 4, costs=chain.at_concurrency(3, [1, 4, 8]),
                                    concurrency=3)
    served = simulate_serving(tables, [lambda: policy.checked_plan(observation)] * 3, chain, 3,
                              sizes=(1, 4, 8))
    together = [step for step in chain.steps if len(step) > 1]
    assert together and all(len({b for b, _ in step if b > 1}) <= 1 for step in together)
    assert served.tokens == [t.tokens() for t in tables]
    block = RecordedSteps(chain.verify, chain.draft)  # the same prices, a block drafter: blocks per request
    observation = PromptObservation(np.zeros(0, np.float32), 4, costs=block.at_concurrency(3, [1, 4, 8]),
                                    concurrency=3)
    simulate_serving(tables, [lambda: policy.checked_plan(observation)] * 3, block, 3, sizes=(1, 4, 8))
    assert any(len({b for b, _ in step if b > 1}) > 1 for step in block.steps)


@pytest.mark.parametrize(("change", "flag"), [
    (lambda t: t.verify[1].__setitem__(4, 0.5), "not monotone"),  # a pass over 4 tokens cheaper than over 1
    (lambda t: t.verify[4].__setitem__(1, 0.9), "not monotone"),  # batch 4 cheaper than batch 2 at 1 token
    (lambda t: t.spread[2].__setitem__(8, 0.6), "noisy"),
    (lambda t: t.verify[2].__setitem__(2, float("nan")), "not a positive finite"),
    (lambda t: t.prefill.__setitem__(512, -1.0), "not a positive finite number of seconds: prefill[1][512]"),
])
def test_a_noisy_or_inconsistent_batch_table_is_flagged_and_warned(tmp_path, change, flag):
    """`bench batch-latency` under load once wrote a non-monotone table (verify 4 < verify 1) without a word;
    a flagged table now loads with the one warning every cost table gets (issue 48: one cost-table rule)."""
    from specpolicy.replay.batch_costs import BatchCostTable

    table = linear_table()
    assert table.check() == []
    bad = BatchCostTable({b: dict(r) for b, r in table.verify.items()},
                         {b: dict(r) for b, r in table.draft.items()},
                         spread={b: {n: 0.01 for n in LENGTHS} for b in table.verify})
    change(bad)
    assert any(flag in problem for problem in bad.check())
    bad.save(tmp_path / "bad.json")
    warnings = BatchCostTable.load(tmp_path / "bad.json").flag_warnings("bad.json")
    assert warnings and all("batch cost table bad.json is flagged" in line for line in warnings)
    assert any(flag in line and "--batch-costs FILE" in line for line in warnings)


SYNTHETIC = ZOO_DIR / "batch-costs-h200-synthetic.json"


def test_compare_labels_synthetic_costs(replay_store):
    from typer.testing import CliRunner

    from specpolicy.cli import app

    result = CliRunner().invoke(app,
                                ["compare", "--sweep", str(replay_store.path), "--policies", "fixed16,fixed4",
                                      "--concurrency", "1,64", "--batch-costs", str(SYNTHETIC), "--format",
                                 "json"])
    assert result.exit_code == 0, result.output
    assert {row["timing"] for row in json.loads(result.stdout)} == {
        "modelled, synthetic costs, decode-only, concurrency 1",  # the table prices no prefill
        "modelled, synthetic costs, decode-only, concurrency 64"}


def test_compare_and_export_warn_once_on_a_flagged_batch_table(replay_store, tmp_path):
    """One rule for both tables: a flagged --batch-costs table prices with a warning naming the file (it was
    refused unless --allow-noisy, where a flagged --costs table warned)."""
    from typer.testing import CliRunner

    from specpolicy.cli import app
    from specpolicy.replay.batch_costs import BatchCostTable

    table = BatchCostTable.load(SYNTHETIC)
    noisy = BatchCostTable(table.verify, table.draft, machine="noisy",
                           spread={b: {n: 0.6 for n in row} for b, row in table.verify.items()})
    noisy.save(tmp_path / "noisy.json")
    runs = {"compare": ["compare", "--sweep", str(replay_store.path), "--policies", "fixed16",
                        "--concurrency", "4",
                        "--format", "json"],
            "export": ["export", "fixed16", "--sweep", str(replay_store.path), "--batch-sizes", "1,4",
                       "--out", str(tmp_path / "export.json")]}
    for command, args in runs.items():
        result = CliRunner().invoke(app, [*args, "--batch-costs", str(tmp_path / "noisy.json")])
        assert result.exit_code == 0, (command, result.output)
        said = " ".join(result.stderr.split())
        warning = f"warning: the batch cost table {tmp_path / 'noisy.json'} is flagged (noisy"
        assert said.count(warning) == 1, said


@pytest.mark.parametrize("concurrency", [1, 4, 16])
def test_plain_decoding_served_is_exactly_the_ar_baseline(concurrency):
    """Issue 48: SGLang "off" (fixed1 served) was priced below plain decoding (0.995x at 4, 0.952x at 16): the
    AR baseline assumed full batches to the end while the simulated tail runs fewer requests per step. Plain
    AR is now served through the same simulator, so B = 1 everywhere is 1x at every concurrency."""
    from specpolicy.evaluation.serving import evaluate_serving
    from specpolicy.registry import create_policy
    from specpolicy.replay.batch_costs import BatchCostTable
    from specpolicy.sweep.store import SweepStore

    store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
    [results] = evaluate_serving(store, [create_policy("fixed1", store.candidates)],
                                 BatchCostTable.load(SYNTHETIC),
                                 concurrency)
    for prompt in results.prompts:
        assert prompt.seconds == pytest.approx(prompt.ar_seconds, rel=1e-9), prompt.prompt_id


def test_vllm_dsd_verifies_by_the_requests_each_step_schedules():
    """Issue 48: vllm-dsd took its K from the nominal concurrency, while vLLM keys its schedule on the
    requests a step schedules (``build_dynamic_sd_schedule_lookup`` of the batch size); the simulation
    tells each request's state the batch its step runs (``state.batch``): alone K(1) + 1, at concurrency 4
    K(4) + 1 in every step (the slots stay full to the last request)."""
    from specpolicy.evaluation.serving import evaluate_serving
    from specpolicy.registry import create_policy
    from specpolicy.replay.batch_costs import BatchCostTable
    from specpolicy.sweep.store import SweepStore

    store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
    policy = create_policy("vllm-dsd:num_speculative_tokens=15,"
                           "num_speculative_tokens_per_batch_size=1-1:15/2-64:3", store.candidates)
    for concurrency, verified in ((1, {16}), (4, {4})):
        served = []
        evaluate_serving(store, [policy], BatchCostTable.load(SYNTHETIC), concurrency,
                         on_served=lambda p, r, seen=served: seen.append(r))
        assert {c.block_size for c in served[0].records} == {16}
        assert {c.verify_length for c in served[0].records} == verified


def test_a_served_request_pays_its_prefill_beside_its_decode_steps_unless_decode_only():
    """Issue 75: the map priced decode steps only, so under load it overstated what a served request gains
    (by aiconfigurator's H200 prices a 1.28x decode speedup at 64 is about 1.15x with a 1k prefill). A table's
    prefill prices now add each request's prefill, at its prompt length, to its time and plain decoding's."""
    from specpolicy.evaluation.serving import evaluate_serving
    from specpolicy.registry import create_policy
    from specpolicy.sweep.store import SweepStore

    store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
    decode_priced = BatchCostTable.load(SYNTHETIC)
    priced = replace(decode_priced, prefill={64: 0.001, 1024: 0.01})  # seconds of one request's prefill
    policy = create_policy("fixed8", store.candidates)
    [decode] = evaluate_serving(store, [policy], decode_priced, 4)
    [whole] = evaluate_serving(store, [policy], priced, 4)
    [left_out] = evaluate_serving(store, [policy], priced, 4, prefills=False)
    lengths = [r.prompt_length for r in store.records() if r.replay is not None]
    for d, w, n in zip(decode.prompts, whole.prompts, lengths, strict=True):
        prefill = float(np.interp(n, [64, 1024], [0.001, 0.01]))
        assert w.seconds == pytest.approx(d.seconds + prefill)
        assert w.ar_seconds == pytest.approx(d.ar_seconds + prefill)
    assert [p.seconds for p in left_out.prompts] == [p.seconds for p in decode.prompts]
    assert 1 < whole.speedup() < decode.speedup() == left_out.speedup()
    assert whole.timing == "modelled, synthetic costs, prefill + decode, concurrency 4"
    assert left_out.timing == decode.timing == "modelled, synthetic costs, decode-only, concurrency 4"
