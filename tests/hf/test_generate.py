"""A specpolicy policy inside transformers' DFlash generate(): same outputs and cycles as specpolicy's
decoder."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from specpolicy.costs import CostTable
from specpolicy.data.prompts import encode_prompts
from specpolicy.data.registry import load_prompts
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.decoding.engine import decode
from specpolicy.defaults import MAX_PROMPT_TOKENS
from specpolicy.evaluation.metrics import cycle_rows
from specpolicy.models import load_pair
from specpolicy.models.sources import zoo_path
from specpolicy.policy import Policy, PromptObservation
from specpolicy.state import DecodeState
from specpolicy.zoo import ZOO_DIR

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "MuseGlimmerAssistantModel"):
    pytest.skip("transformers < 5.15 has no DFlash generate()", allow_module_level=True)

from specpolicy import hf  # noqa: E402  (after the version skip)


@pytest.fixture(scope="module")
def pair():
    return load_pair("tiny", "tiny", "float32", "cpu")


@pytest.fixture(scope="module")
def assistant(pair):
    return hf.to_transformers_assistant(pair.drafter)


@pytest.fixture(scope="module")
def costs() -> CostTable:
    return CostTable.load(ZOO_DIR / "sweeps" / "sharegpt" / "latency.json")


@pytest.fixture(scope="module")
def held_out(pair) -> list[list[int]]:
    return encode_prompts(pair.tokenizer, load_prompts("sharegpt", 3, 0), max_tokens=MAX_PROMPT_TOKENS)


def _both(pair, assistant, ids, policy, costs, max_new_tokens=48, **extra):
    policy_or_size = hf.resolve_policy(policy)
    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=max_new_tokens)
    if isinstance(policy_or_size, int):
        trace = decoder.generate(ids, policy_or_size)
    else:
        trace = decode(decoder, ids, policy_or_size, prompt_id="t", costs=costs)
    tensor = torch.tensor([ids])
    result = hf.generate(pair.target, assistant, policy_or_size, costs=costs, input_ids=tensor,
                         attention_mask=torch.ones_like(tensor), do_sample=False,
                         max_new_tokens=max_new_tokens,
                         **extra)
    return trace, result, result.sequences[0, len(ids):].tolist()


SLOW = pytest.mark.slow  # the rest of the matrix; the fast tier keeps one of each kind


@pytest.mark.parametrize("policy", [16, "blockpilot-guard", "adaptive-verify", "threshold", "llamacpp-pmin",
                                    *(pytest.param(p, marks=SLOW) for p in (
                                        1, 2, 7, 32, "fixed16", "adaptive", "marginal16",
                                        "trtllm-schedule:max_draft_len=7",
                                        "vllm-dsd:num_speculative_tokens=7,"
                                        "num_speculative_tokens_per_batch_size=1-4:3"))])
def test_generate_matches_the_decoder_cycle_for_cycle(pair, assistant, costs, held_out, policy):
    ids = held_out[0]
    trace, result, output = _both(pair, assistant, ids, policy, costs)
    assert output == trace.output_ids
    assert cycle_rows(result.cycles) == cycle_rows(trace.cycles)
    assert [c.verify_length for c in result.cycles] == [c.verify_length for c in trace.cycles]
    assert sum(c.committed for c in result.cycles) == len(output) - 1  # the prefill token is no cycle's


@pytest.mark.slow
@pytest.mark.parametrize("policy", [16, "blockpilot-guard", "grow", "heuristic"])
def test_every_held_out_prompt_agrees_and_equals_greedy(pair, assistant, costs, held_out, policy):
    for ids in held_out:
        trace, result, output = _both(pair, assistant, ids, policy, costs, max_new_tokens=96)
        tensor = torch.tensor([ids])
        greedy = pair.target.generate(tensor, attention_mask=torch.ones_like(tensor), do_sample=False,
                                      max_new_tokens=96)[0, len(ids):].tolist()
        assert output == trace.output_ids == greedy
        assert cycle_rows(result.cycles) == cycle_rows(trace.cycles)


@pytest.mark.parametrize("max_new_tokens", [1, 2, 3, 17])
def test_budget_edges_match(pair, assistant, costs, held_out, max_new_tokens):
    trace, result, output = _both(pair, assistant, held_out[1], 16, costs, max_new_tokens=max_new_tokens)
    assert output == trace.output_ids and len(output) <= max_new_tokens
    assert cycle_rows(result.cycles) == cycle_rows(trace.cycles)


class Alternating(Policy):
    """A per-cycle policy that swings B widely, so the drafter's cache is cropped by changing sizes."""

    name, per_step = "alternating", True

    def select(self, observation: PromptObservation) -> int:
        return 16

    def step(self, state: DecodeState, observation: PromptObservation) -> int:
        return (16, 1, 3, 1, 1, 24, 2)[state.cycle % 7]


def test_block_size_may_change_every_cycle(pair, assistant, costs, held_out):
    policy = Alternating((1, 2, 3, 16, 24))  # its own choices: every engine refuses a size outside them
    trace, result, output = _both(pair, assistant, held_out[2], policy, costs, max_new_tokens=64)
    assert output == trace.output_ids
    assert cycle_rows(result.cycles) == cycle_rows(trace.cycles)
    assert result.block_sizes[:7] == [16, 1, 3, 1, 1, 24, 2]


def test_attach_restores_transformers_generator(pair, assistant, held_out):
    cls_method = type(pair.target)._get_candidate_generator
    tensor = torch.tensor([held_out[0]])
    with hf.attach(pair.target, 4) as run:
        assert "_get_candidate_generator" in pair.target.__dict__
        pair.target.generate(tensor, attention_mask=torch.ones_like(tensor), do_sample=False,
                             max_new_tokens=12)
        assert run.cycles == []  # plain greedy generate: transformers' own path, no candidate generator
        pair.target.generate(tensor, attention_mask=torch.ones_like(tensor), do_sample=False,
                             max_new_tokens=12,
                             assistant_model=assistant, speculation_type="dflash")
        assert {c.block_size for c in run.cycles} == {4}
    assert "_get_candidate_generator" not in pair.target.__dict__
    assert type(pair.target)._get_candidate_generator is cls_method


def test_attaching_a_second_policy_is_refused_until_the_first_detaches(pair):
    """A second attach once silently switched the first off (its cycles stayed empty)."""
    with hf.attach(pair.target, 4), pytest.raises(ValueError, match="already attached.*detach"):
        hf.attach(pair.target, 8)
    with hf.attach(pair.target, 8):  # the first detached: free again
        pass
    assert "_get_candidate_generator" not in pair.target.__dict__


def test_sampling_runs_through_speculative_sampling(pair, assistant, costs, held_out):
    torch.manual_seed(0)
    tensor = torch.tensor([held_out[0]])
    result = hf.generate(pair.target, assistant, "adaptive", costs=costs, input_ids=tensor,
                         attention_mask=torch.ones_like(tensor), do_sample=True, temperature=0.8,
                         max_new_tokens=40)
    new = result.sequences.shape[1] - tensor.shape[1]
    assert 1 <= new <= 40 and sum(c.committed for c in result.cycles) == new - 1
    assert all(0 <= c.accepted <= c.block_size - 1 for c in result.cycles)


def test_a_specpolicy_drafter_folder_is_converted_on_the_fly(pair, held_out):
    tensor = torch.tensor([held_out[0]])
    result = hf.generate(pair.target, zoo_path("tiny", "drafter"), 8, input_ids=tensor,
                         attention_mask=torch.ones_like(tensor), do_sample=False, max_new_tokens=20)
    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=20)
    assert result.sequences[0, tensor.shape[1]:].tolist() == decoder.generate(held_out[0], 8).output_ids


def test_oracles_and_foreign_vocabularies_are_refused_before_generating(pair):
    with pytest.raises(ValueError, match="cannot decode live"):
        hf.attach(pair.target, "oracle")
    from zoo_build.random_models import make_target

    with pytest.raises(ValueError, match="vocabulary"):
        hf.attach(make_target(), "blockpilot")


def test_cost_aware_policy_without_costs_names_the_fix(pair, assistant, held_out):
    tensor = torch.tensor([held_out[0]])
    with pytest.raises(ValueError, match="cost table"):
        hf.generate(pair.target, assistant, "adaptive", input_ids=tensor, max_new_tokens=8, do_sample=False)


def test_old_transformers_gets_one_clear_message(monkeypatch):
    from specpolicy.hf import compat

    monkeypatch.setattr(compat, "version", lambda name: "5.14.1")
    with pytest.raises(RuntimeError, match=r"transformers>=5\.15\.0"):
        compat.require_dflash_support()
    assert importlib.metadata.version("transformers")  # the real one is untouched


def test_an_rl_agent_policy_runs_inside_generate(pair, assistant, costs, held_out):
    """An agent of DraftVerifyStep-v0 (here a hand-written one on its observation) decodes in generate()
    exactly as in specpolicy's decoder: B before the cycle, L after reading the drafted block."""
    from specpolicy.envs import AgentPolicy, AgentSpec

    candidates = (1, 2, 4, 8, 16)

    def agent(observation):
        if observation[20] == 0:  # draft phase: B = 16 or 4, from the accepted history
            return 4 if 0 < observation[2] * 16 < 2 else 2
        running = observation[22 + 15: 22 + 30]
        return max(i for i, b in enumerate(candidates) if b <= 1 + int((running >= 0.4).sum()))

    policy = AgentPolicy(agent, AgentSpec("draft_verify", candidates, budget=48))
    trace, result, output = _both(pair, assistant, held_out[1], policy, costs)
    assert output == trace.output_ids
    assert cycle_rows(result.cycles) == cycle_rows(trace.cycles)
    assert [c.verify_length for c in result.cycles] == [c.verify_length for c in trace.cycles]
    assert any(c.verify_length < c.block_size for c in trace.cycles)


def test_a_drafter_made_for_another_target_is_refused_naming_the_mismatch(assistant):
    """Reported: mismatched models gave a raw AttributeError or IndexError from inside generate()."""
    from zoo_build.random_models import make_target

    for other, what in ((make_target(vocab=4096, hidden=256, layers=2), "layers"),
                        (make_target(vocab=4096, hidden=64, layers=6), "hidden size"),
                        (make_target(vocab=97, hidden=256, layers=6), "vocabulary")):
        ids = torch.tensor([[5, 6, 7, 8]])
        with pytest.raises(ValueError, match=what):
            hf.generate(other, assistant, "fixed8", input_ids=ids, attention_mask=torch.ones_like(ids),
                        do_sample=False, max_new_tokens=8)


def test_an_empty_candidate_list_is_refused():
    """Reproduced first: candidates=[] fell back to the default candidates silently."""
    with pytest.raises(ValueError, match="candidates must name distinct block sizes"):
        hf.resolve_policy("adaptive", [])


@pytest.mark.parametrize(("arguments", "message"), [
    ({"policy": None}, "policy must be a policy name, a Policy or a block size"),  # "block size ... got None"
    ({"policy": "fixed16", "costs": 3}, "costs must be a CostTable or its file"),  # accepted
])
def test_attach_refuses_arguments_of_the_wrong_kind_naming_them(pair, arguments, message):
    with pytest.raises(ValueError, match=message):
        hf.attach(pair.target, arguments.pop("policy"), **arguments)


def test_the_prompt_id_a_policy_sees_inside_generate_is_the_callers(pair, assistant, held_out):
    """Every observation inside generate() was named "hf", undocumented and not settable: a policy seeded on
    the prompt id (random) picked the same size for every prompt there."""
    ids = torch.tensor([held_out[0]])
    picked = set()
    for prompt_id in ("a", "b", "c", "d", "e", "f"):
        result = hf.generate(pair.target, assistant, "random", candidates=(1, 2, 4, 8, 16),
                             prompt_id=prompt_id,
                             input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=6)
        picked.add(result.cycles[0].block_size)
    assert len(picked) > 1  # six ids, five sizes: one size for all would mean the id is not read


@pytest.mark.parametrize("policy", ["vllm-adaptive", "adaptive-verify", "threshold"])
def test_sampling_under_a_verify_length_policy(pair, assistant, costs, held_out, policy):
    """Issue 48: do_sample=True under vllm-adaptive raised IndexError inside transformers."""
    torch.manual_seed(0)
    tensor = torch.tensor([held_out[0]])
    result = hf.generate(pair.target, assistant, policy, costs=costs, input_ids=tensor,
                         attention_mask=torch.ones_like(tensor), do_sample=True, temperature=0.8,
                         max_new_tokens=40)
    new = result.sequences.shape[1] - tensor.shape[1]
    assert 1 <= new <= 40 and sum(c.committed for c in result.cycles) == new - 1
    assert all(0 <= c.accepted <= c.verify_length - 1 for c in result.cycles)


def test_a_bfloat16_target_with_a_float32_drafter(assistant, costs, held_out):
    """Issue 48: a target in its default bfloat16 beside a float32 drafter raised a raw torch dtype error."""
    target = load_pair("tiny", "tiny", "bfloat16", "cpu").target
    tensor = torch.tensor([held_out[0]])
    result = hf.generate(target, assistant, "adaptive", costs=costs, input_ids=tensor,
                         attention_mask=torch.ones_like(tensor), do_sample=False, max_new_tokens=24)
    assert result.sequences.shape[1] > tensor.shape[1] and result.cycles


def test_an_assistant_that_is_not_a_dflash_drafter_is_refused_naming_what_it_is(pair):
    """Reported open since earlier audits: a plain causal LM as the assistant reached transformers' DFlash
    loop."""
    target = pair.target
    ids = torch.tensor([[5, 6, 7, 8]])
    with pytest.raises(ValueError, match="not a DFlash drafter .*model_type 'qwen3'.*pass a DFlash drafter"):
        hf.generate(target, target, "fixed8", input_ids=ids, attention_mask=torch.ones_like(ids),
                    do_sample=False,
                    max_new_tokens=8)
