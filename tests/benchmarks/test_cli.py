"""``python -m benchmarks``: the maintainers' benchmarks refuse bad input in one line, as the package's CLI
does."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from benchmarks.__main__ import app


@pytest.mark.parametrize(("args", "message"), [
    (["decode", "--draft-sampling"], "--draft-sampling needs --temperature > 0"),
    (["verify", "--candidates", "0,2"], "--candidates"),
    (["hf", "--policies", " "], "no policies given"),
])
def test_bad_input_fails_with_one_clear_line(args, message):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert message in " ".join(result.output.split())


def test_every_benchmark_is_listed():
    result = CliRunner().invoke(app, ["--help"])
    assert all(name in result.output for name in ("decode", "hf", "verify", "sweep", "env", "twin"))
