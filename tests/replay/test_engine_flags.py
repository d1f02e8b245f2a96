"""What ``specpolicy export`` writes, read back against each engine's flags and config keys as its own source
defines them (``tests/fixtures/engine-flags.json``: versions and files named), and by the engine's own parser
where the engine installs (mlx-vlm and dflash-mlx on Linux with ``mlx[cpu]``; skipped where they are not)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from specpolicy.evaluation.export import export_for_engines
from specpolicy.registry import create_policy
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.sweep.store import SweepStore
from specpolicy.zoo import ZOO_DIR

ENGINES = json.loads((Path(__file__).parents[1] / "fixtures" / "engine-flags.json").read_text())
POLICIES = ("fixed16", "fixed4", "fixed1", "blockpilot",
            "vllm-dsd:num_speculative_tokens=15,num_speculative_tokens_per_batch_size=1-1:15/2-64:3")
ARGS = {"sglang": "sglang_args", "mlx-vlm": "mlx_vlm_args", "dflash-mlx": "dflash_mlx_args"}


@pytest.fixture(scope="module")
def documents() -> dict[str, dict]:
    store = SweepStore.load(ZOO_DIR / "sweeps" / "sharegpt")
    costs = BatchCostTable.load(BatchCostTable.SHIPPED)
    return {name: export_for_engines(create_policy(name, store.candidates), store, costs, [1, 8],
                                     "org/drafter") for name in POLICIES}


def _check(engine: str, args: list[str]) -> None:
    """Every flag of ``args`` one ``engine`` defines, each value of the kind (and among the choices) it
    takes."""
    flags, i = ENGINES[engine]["flags"], 0
    while i < len(args):
        spec = flags.get(args[i])
        assert spec is not None, f"{engine} {ENGINES[engine]['version']} has no flag {args[i]}"
        if spec["value"] is not None:
            value = args[i + 1]
            assert spec["choices"] is None or value in spec["choices"], (engine, args[i], value)
            if spec["value"] == "int":
                int(value)
            i += 1
        i += 1


@pytest.mark.parametrize("name", POLICIES)
def test_every_exported_flag_and_key_is_one_the_engine_defines(documents, name):
    document = documents[name]
    for engine, key in ARGS.items():
        if document[key] is not None:
            _check(engine, document[key])
    config = document["vllm_speculative_config"] or {}
    assert set(config) <= set(ENGINES["vllm"]["keys"]) and all(isinstance(config[k], int) for k in config
                                                               if ENGINES["vllm"]["keys"][k] == "int")


def test_mlx_vlm_runs_sglangs_block_and_dflash_mlx_the_checkpoints_block_verified_as_vllm_at_one(documents):
    """mlx-vlm's server takes one block (``--draft-block-size``) as SGLang does; dflash-mlx's drafts only the
    checkpoint's block (16 here) and caps what it verifies (``--verify-len-cap``), vLLM's batch-one shape."""
    def flag(args: list[str], name: str) -> str:
        return args[args.index(name) + 1]

    assert flag(documents["fixed4"]["mlx_vlm_args"], "--draft-block-size") == "4"
    assert documents["fixed4"]["dflash_mlx_args"] is None  # dflash-mlx drafts no block of 4
    assert flag(documents["fixed16"]["dflash_mlx_args"], "--verify-len-cap") == "16"
    dsd = documents[POLICIES[-1]]
    assert flag(dsd["dflash_mlx_args"], "--verify-len-cap") == "16"  # K(1) + 1, where K(8) is 3
    assert dsd["per_batch_size"][1]["vllm_verified_drafts"] == 3
    assert documents["fixed1"]["mlx_vlm_args"] == [] and documents["fixed1"]["dflash_mlx_args"] is None


def _mlx_vlm_parser() -> argparse.ArgumentParser:
    """mlx-vlm's server parser, built inside its ``main``: taken where ``main`` would parse."""
    cli = pytest.importorskip("mlx_vlm.server.cli")
    built: list[argparse.ArgumentParser] = []

    class Parsed(Exception):
        pass

    def take(parser, *args, **kwargs):
        built.append(parser)
        raise Parsed

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", take)
        patch.setattr(sys, "argv", ["mlx_vlm.server"])
        with pytest.raises(Parsed):
            cli.main()
    return built[0]


@pytest.mark.parametrize("engine", ["mlx-vlm", "dflash-mlx"])
def test_the_engines_own_parser_reads_the_export(documents, engine):
    if engine == "dflash-mlx":
        parser = pytest.importorskip("dflash_mlx.server.config").build_parser()
    else:
        parser = _mlx_vlm_parser()
    for name, document in documents.items():
        args = document[ARGS[engine]]
        if args:
            parsed = parser.parse_args(["--model", "org/target", *args])
            assert parsed.draft_model == "org/drafter", name
