"""The hostile-input audit as a table: every command (and every maintainers' benchmark), every option it has,
the bad values users type.

Each case is refused with exit code 2 and one line on stderr: no traceback, no "bug in specpolicy",
before any model loads (loading one here raises :class:`ModelWorkStarted`), naming the option or the
value given, and every flag the message suggests is one the command has (or, inside a quoted
``specpolicy OTHER ...``, one OTHER has). The matrix is built from the commands themselves, so a new
option with a known kind of value is audited without a new line here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from benchmarks.__main__ import app as benchmarks_app
from specpolicy.cli import app

pytestmark = pytest.mark.slow  # 371 invocations, about a minute
runner = CliRunner()
ROOT = typer.main.get_command(app)


class ModelWorkStarted(BaseException):
    """Raised by every model loader during the audit: input alone should have decided the case."""


def _commands(group=ROOT, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    subs = getattr(group, "commands", None)
    if not subs:
        return {prefix: group}
    return {name: cmd for key, sub in subs.items() for name, cmd in _commands(sub, (*prefix, key)).items()}


COMMANDS = _commands() | _commands(typer.main.get_command(benchmarks_app), ("benchmarks",))
"""every command of ``specpolicy``, and of the maintainers' ``python -m benchmarks`` (its paths start with
benchmarks)"""
INTS = ["0", "-3"]
FRACTIONS = ["-1", "nan", "inf"]
# option -> bad values a user types (placeholders: MISSING, FILE, EMPTY_DIR, GARBAGE, NAN_TABLE, TXT)
BAD = {
    "--candidates": ["0", "1,,0", "abc", "65", "8-4", "2,2"], "--block-size": ["0", "-1", "65", "abc"],
    "--confidences": ["0", "abc", "99"], "--lengths": ["0", "abc"], "--batch-sizes": ["0", "abc", "1,1"],
    "--concurrency": ["0", "abc", "100000"],
    "--temperature": ["-1", "nan", "inf"], "--max-new-tokens": INTS, "--max-samples": INTS,
    "--max-prompt-tokens": INTS, "--threads": INTS, "--repeats": INTS, "--context": INTS,
    "--prompts": [*INTS, "no-such-set", "MISSING.jsonl", "EMPTY.jsonl"],  # a count, or import-traces' set
    "--hidden": INTS, "--depth": INTS, "--epochs": INTS, "--batch-size": INTS,
    "--patience": INTS, "--window": ["-1"], "--num-envs": INTS, "--steps": INTS, "--live-episodes": ["-1"],
    "--num-target-layers": INTS, "--target-steps": ["-1"], "--drafter-steps": ["-1"],
       "--check-prompts": ["-1"],
    "--lr": FRACTIONS, "--weight-decay": FRACTIONS, "--dropout": ["-0.1", "1.5", "nan"],
    "--validation-share": ["-0.1", "0.9", "nan"],
    "--device": ["tpu", "cuda:x"], "--dtype": ["float8", "int4"], "--format": ["xml"], "--mode": ["fast"],
    "--by": ["colour"], "--split": ["valid"], "--label": ["best"], "--preprocess": ["zscore"],
    "--objective": ["mse"], "--executor": ["spark"],
    "--dataset": ["no-such-set", "MISSING.jsonl", "EMPTY.jsonl", "GARBAGE.jsonl"],
    "--sweep": ["MISSING", "FILE", "EMPTY_DIR"],
       "--costs": ["MISSING.json", "GARBAGE.json", "NAN_TABLE.json"],
    "--batch-costs": ["MISSING.json", "GARBAGE.json", "BAD_PREFILL.json"],
    "--target": ["MISSING", "EMPTY_DIR", "FILE"], "--drafter": ["MISSING", "EMPTY_DIR", "FILE"],
    "--policies": ["nope", "fixed0", "fixed99", "blockpilot:MISSING", "agent:MISSING"],
    "--policy": ["nope", "fixed0", "blockpilot:MISSING"], "--baseline": ["nope", "fixed99"],
       "--oracle": ["nope"],
    "--plot": ["TXT", "EMPTY_DIR", "UNDER_FILE.png"], "--run-dir": ["FILE"], "--engine": ["nope"],
    "--out": ["UNDER_FILE"], "--work": ["UNDER_FILE"],
       "--blocks": ["0", "abc", "99"],
}
NOT_CHECKED = {  # (command, option): why its values are not the command's to refuse
    (("export",), "--drafter"): "a name written into the engines' configs; the serving machine resolves it",
    (("import-traces",), "--dataset"): "the name the imported prompts are given, not a prompt set to read",
}
POSITIONAL = {  # (command, argument) -> bad values
    (("train",), "policy"): ["nope", "fixed16"], (("export",), "policy"): ["nope", "blockpilot:MISSING"],
    (("generate",), "prompt"): [""], (("import-blockpilot",), "folder"): ["MISSING", "FILE", "EMPTY_DIR"],
    (("convert",), "source"): ["MISSING", "EMPTY_DIR"],
    (("import-traces",), "file"): ["MISSING", "FILE", "EMPTY_DIR", "EMPTY.jsonl", "GARBAGE.jsonl"],
    (("benchmarks", "traces"), "folder"): ["MISSING", "FILE", "EMPTY_DIR"],
    (("tune",), "rule"): ["nope", "fixed16", "dflash-mlx:window_size=2"],
    (("bench", "from-run"), "file"): ["MISSING", "FILE", "EMPTY_DIR", "EMPTY.jsonl", "GARBAGE.jsonl"],
}


def _base(command: tuple[str, ...], w: dict[str, str]) -> list[str]:
    """The command with valid, cheap values for what it requires (the tested option is added to these)."""
    models = ["--target", w["TARGET"], "--drafter", w["DRAFTER"]]
    return {
        ("compare",): ["--sweep", w["STORE"], "--policies", "fixed16"],
        ("sweep",): ["--dataset", w["PROMPTS"], "--max-samples", "2", "--max-new-tokens", "4", "--out",
                     w["OUT"],
                     *models],
        ("train",): ["logreg", "--sweep", w["STORE"], "--out", w["OUT"]],
        ("generate",): ["hi", "--max-new-tokens", "4", "--policy", "fixed8", *models],
        ("export",): ["fixed16", "--sweep", w["STORE"], "--batch-costs", w["BATCH"], "--batch-sizes", "1-2",
                      "--out", w["OUT"] + ".json"],
        ("import-blockpilot",): [w["BP"], "--out", w["OUT"]],
        ("import-traces",): [w["TRACE"], "--out", w["OUT"], "--candidates", "1-3"],
        ("benchmarks", "traces"): [w["SPECDECODE"], "--work", w["OUT"]],
        ("benchmarks", "twin"): ["--sweep", w["STORE"], *models],
        ("benchmarks", "field"): ["--sweep", w["STORE"], "--fixed", "1,2,4,8,16"],
        ("tune",): ["dflash-mlx", "--sweep", w["STORE"], "--grid", "window_size=2,4"],
        ("bench", "from-run"): [w["CYCLES"]],
        ("convert",): [w["DRAFTER"], w["OUT"]],
        ("bench", "serving-costs"): ["--model", "Qwen/Qwen3-8B", "--gpu", "h100_sxm", "--out",
                                     w["OUT"] + ".json"],
    }.get(command, [])


def _options(command) -> set[str]:
    flags = {o for p in command.params for o in getattr(p, "opts", ()) if o.startswith("--")}
    return flags | {"--help", "--debug"}


def _cases() -> list:
    cases = []
    for path, command in COMMANDS.items():
        for option in sorted(o for o in _options(command) & set(BAD) if (path, o) not in NOT_CHECKED):
            cases += [pytest.param(path, option, bad,
                                   id=f"{' '.join(path)} {option}={bad}") for bad in BAD[option]]
        for (where, argument), values in POSITIONAL.items():
            if where == path:
                cases += [pytest.param(path, argument, bad, id=f"{' '.join(path)} <{argument}>={bad}")
                          for bad in values]
    return cases


@pytest.fixture(scope="module")
def world(test_zoo, replay_store, tmp_path_factory) -> dict[str, str]:
    """Paths the cases name: valid ones for the base command, and the broken files users pass."""
    tmp = tmp_path_factory.mktemp("audit")
    (tmp / "file").write_text("x")
    (tmp / "empty").mkdir()
    (tmp / "empty.jsonl").write_text("")
    (tmp / "garbage.jsonl").write_text("{not json\n")
    (tmp / "garbage.json").write_text("{not json")
    table = json.loads((Path(replay_store.path) / "latency.json").read_text())
    table["verify_seconds"] = {k: float("nan") for k in table["verify_seconds"]}
    (tmp / "nan.json").write_text(json.dumps(table))
    (tmp / "prompts.txt").write_text("hello\nworld\n")
    (tmp / "trace.jsonl").write_text(json.dumps({"id": "a", "prompt_token_ids": [1, 2],
                                                 "generated_token_ids": [3, 4],
                                                 "acc_eagle": {"acc_len": [3, 1]},
                                                 "acc_ngram": {"acc_len": [1, 1]}}))
    (tmp / "specdecode").mkdir()
    for name in ("gsm8k", "instructcoder", "sharegpt", "cnn"):
        (tmp / "specdecode" / f"combined_{name}.jsonl").write_text((tmp / "trace.jsonl").read_text())
    from tests.sweep.test_dflash_mlx_cycles import write_cycles

    write_cycles(tmp / "cycle_events.jsonl", requests=2)
    (tmp / "bp").mkdir()
    (tmp / "bp" / "16.json").write_text(json.dumps({"0": 2.0}))
    from tests.replay.test_serving import linear_table

    linear_table(batches=(1, 2)).save(tmp / "batch.json")
    table = json.loads((tmp / "batch.json").read_text())
    (tmp / "bad_prefill.json").write_text(json.dumps(table | {"prefill": [0.01, 0.02]}))  # not {tokens: s}
    target, drafter = test_zoo
    return {"BATCH": str(tmp / "batch.json"), "BAD_PREFILL": str(tmp / "bad_prefill"),
            "STORE": str(replay_store.path), "CYCLES": str(tmp / "cycle_events.jsonl"), "TARGET": str(target),
            "DRAFTER": str(drafter), "TRACE": str(tmp / "trace.jsonl"), "SPECDECODE": str(tmp / "specdecode"),
            "PROMPTS": str(tmp / "prompts.txt"), "OUT": str(tmp / "out"), "BP": str(tmp / "bp"),
            "MISSING": str(tmp / "no" / "such" / "path"), "FILE": str(tmp / "file"),
            "UNDER_FILE": str(tmp / "file" / "out"),
            "EMPTY_DIR": str(tmp / "empty"),
            "EMPTY": str(tmp / "empty"), "GARBAGE": str(tmp / "garbage"), "NAN_TABLE": str(tmp / "nan"),
            "TXT": str(tmp / "plot.txt")}


def _fill(value: str, w: dict[str, str]) -> str:
    """``MISSING.jsonl`` -> a missing .jsonl path; ``blockpilot:MISSING`` -> a policy at a missing folder."""
    for key in sorted(w, key=len, reverse=True):
        value = re.sub(rf"\b{key}\b", w[key], value)
    return value


def _args(path: tuple[str, ...], option: str, bad: str, w: dict[str, str]) -> list[str]:
    base, value = _base(path, w), _fill(bad, w)
    if not option.startswith("--"):  # the positional argument tested is the base's first value
        return [*path, value, *base[1:]]
    if option in base:  # the tested option replaces the base's value for it
        i = base.index(option)
        base = base[:i] + base[i + 2:]
    if path == ("compare",) and option in ("--dataset", "--temperature", "--max-samples", "--max-new-tokens",
                                           "--seed", "--target", "--drafter", "--device", "--dtype",
                                           "--mode"):
        base = ["--dataset", w["PROMPTS"], "--max-samples", "2", "--max-new-tokens", "4", "--policies",
                "fixed16",
                "--target", w["TARGET"], "--drafter", w["DRAFTER"]]
        base = [a for i, a in enumerate(base) if option not in (a, base[i - 1] if i else "")]
    return [*path, *base, option, value]


def _flags_named(text: str, path: tuple[str, ...]) -> list[str]:
    """Flags a message suggests that the command it suggests them for lacks."""
    foreign = []
    quoted = {m.start(): m.group(1) for m in re.finditer(r"`specpolicy ((?:zoo |bench )?[a-z-]+)[^`]*`",
                                                         text)}
    for match in re.finditer(r"(?<![\w-])--[a-z][a-z0-9-]*", text):
        owner = path
        for start, name in quoted.items():
            if start <= match.start() <= text.find("`", start + 1):
                owner = tuple(name.split())
        if owner in COMMANDS and match.group() not in _options(COMMANDS[owner]):
            foreign.append(f"{match.group()} (for {' '.join(owner)})")
    return foreign


@pytest.mark.parametrize(("path", "option", "bad"), _cases())
def test_bad_input_is_refused_in_one_line_before_model_work(path, option, bad, world, monkeypatch):
    import transformers

    from specpolicy.models.dflash import DFlashDrafter

    def started(*args, **kwargs):
        raise ModelWorkStarted(args[:1])

    for loader in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer, DFlashDrafter):
        monkeypatch.setattr(loader, "from_pretrained", started)
    args = _args(path, option, bad, world)
    result = runner.invoke(benchmarks_app, args[1:]) if path[0] == "benchmarks" else runner.invoke(app, args)
    assert not isinstance(result.exception, ModelWorkStarted), f"models loaded before refusing: {args}"
    # Typer's usage errors come boxed
    text = " ".join(re.sub("[│╭╮╰╯─]", " ", result.output).split())
    assert result.exit_code == 2, f"accepted (exit {result.exit_code}): {args}\n{text[-600:]}"
    assert isinstance(result.exception, SystemExit), f"raised {result.exception!r}"
    assert "Traceback" not in text and "bug in specpolicy" not in text, text
    value = _fill(bad, world)
    named = any(part and part in text for part in (option, bad, value, value.split(":")[-1]))
    assert named, f"the message names neither {option} nor {bad!r}: {text}"
    assert _flags_named(text, path) == [], text
    if "error:" in result.output:  # ours (Typer's usage errors come boxed): the refusal alone, on one line
        assert result.output.strip().startswith("error:") and result.output.strip().count("\n") == 0, \
            result.output
