"""What tests/fixtures ships prebuilt is what the code builds: the recipes' pairs, and the stores swept with
them."""

from __future__ import annotations

import json

import pytest
import torch

from specpolicy.decoding import SpeculativeDecoder
from specpolicy.sweep.records import SweepRecord
from tests.fixtures.prebuilt import (
    STORE_SETTINGS,
    STORES,
    TEST_ZOO,
    copy_test_zoo,
    load_trained_pair,
    sweep_store,
)
from tests.fixtures.recipes import make_trained_pair, save_test_zoo
from tests.tolerances import assert_float16_rows_close

pytestmark = pytest.mark.slow  # distils both pairs and sweeps both stores again (about 20 s)
PROMPTS = [[4 + i, 7, 9, 5 + i] for i in range(6)]


def _mean_tau(target, drafter) -> float:
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=60, stop_token_ids=[])
    return sum(decoder.generate(p, 8).tau for p in PROMPTS) / len(PROMPTS)


def _same_target(a, b) -> None:
    """Random initialisation from a seed is exact on every machine: the targets are equal bit for bit."""
    a_state, b_state = a.state_dict(), b.state_dict()
    assert a_state.keys() == b_state.keys()
    assert all(torch.equal(a_state[k], b_state[k]) for k in a_state)


SAVED_ONLY = {"architectures", "_name_or_path", "transformers_version"}
"""config keys transformers writes of itself (its version moves with every release): not the project's
decision"""


def _decided(config: dict) -> dict:
    """What the project decides in a saved or built config: everything but :data:`SAVED_ONLY`."""
    return {k: v for k, v in config.items() if k not in SAVED_ONLY}


def test_the_shipped_trained_pair_is_what_make_trained_pair_builds():
    """Rebuild it with ``python -m tests.fixtures.prebuilt`` when this fails after a recipe change."""
    (target, drafter), (shipped_target, shipped_drafter) = make_trained_pair(), load_trained_pair()
    _same_target(target, shipped_target)
    assert _decided(drafter.config.to_dict()) == _decided(shipped_drafter.config.to_dict())
    # distillation may round differently on another CPU: the drafter must draft as well, not bit for bit
    assert _mean_tau(target, drafter) == pytest.approx(_mean_tau(shipped_target, shipped_drafter), rel=0.15)


def test_the_shipped_test_zoo_is_what_save_test_zoo_builds(tmp_path):
    """Files a dependency writes are compared as what the project decides in them (parsed, its own keys),
    never byte for byte: a new transformers or tokenizers release may write them otherwise."""
    built = save_test_zoo(tmp_path)
    shipped = (TEST_ZOO / "target" / "chat_template.jinja").read_text()
    assert (built[0] / "chat_template.jinja").read_text() == shipped
    pairs = [(built[0] / name, TEST_ZOO / "target" / name)
             for name in ("tokenizer.json", "config.json", "generation_config.json")]
    for new, shipped in [*pairs, (built[1] / "config.json", TEST_ZOO / "drafter" / "config.json")]:
        assert _decided(json.loads(new.read_text())) == _decided(json.loads(shipped.read_text())), new.name
    from transformers import Qwen3ForCausalLM

    folders = (built[0], TEST_ZOO / "target")
    _same_target(*(Qwen3ForCausalLM.from_pretrained(str(folder)) for folder in folders))


FLOAT_BLOBS = ("confidences", "entropies")  # the drafter's float16 outputs: compared with a tolerance


def _decisions(record: dict) -> dict:
    """A record's decisions: without wall-clock seconds (they differ run to run), the features' file
    name and checksums, or the drafter's float16 outputs (logits may round differently on another CPU;
    the tokens may not)."""
    reference = {"block_size": record["reference"]["block_size"],
                 "cycles": [c[:3] for c in record["reference"]["cycles"]]}
    skipped = ("reference", "features", "features_sha256", "checksum")
    replay = {k: v for k, v in (record["replay"] or {}).items() if k not in FLOAT_BLOBS}
    return {k: v for k, v in record.items() if k not in skipped} | {"reference": reference, "replay": replay}


@pytest.mark.parametrize("name", list(STORE_SETTINGS))
def test_each_shipped_store_is_what_a_sweep_of_the_shipped_zoo_records(name, tmp_path):
    """Tokens, taus, replay tables and confidences equal a fresh sweep's (timings aside)."""
    zoo = copy_test_zoo(tmp_path / "zoo")
    fresh = sweep_store(name, tmp_path / name, zoo)
    lines = [[json.loads(x) for x in (folder / "records.jsonl").read_text().splitlines()]
             for folder in (fresh.path, STORES / name)]
    assert [_decisions(r) for r in lines[0]] == [_decisions(r) for r in lines[1]]
    read = [[SweepRecord.model_validate({k: v for k,
                                         v in r.items() if k != "checksum"}) for r in rs] for rs in lines]
    for ours, theirs in zip(*read):
        tables = [record.replay.table(record.prompt_length) for record in (ours, theirs)]
        assert_float16_rows_close(tables[0].confidences, tables[1].confidences,
                                  f"{ours.prompt_id} confidences")
        assert_float16_rows_close(tables[0].entropies, tables[1].entropies, f"{ours.prompt_id} entropies")
    shipped = json.loads((STORES / name / "meta.json").read_text())
    assert {k: v for k, v in fresh.meta.items() if k in STORE_SETTINGS[name]} == {
        k: v for k, v in shipped.items() if k in STORE_SETTINGS[name]}
