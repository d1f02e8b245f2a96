"""Options and output helpers shared by the commands."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specpolicy import defaults
from specpolicy.arguments import check_temperature
from specpolicy.files import check_folder_path

Settings = TypeVar("Settings")

stderr = Console(stderr=True)
stderr.soft_wrap = not stderr.is_terminal  # a log or a pipe keeps each message on one line
stdout = Console()

TargetOption = typer.Option(defaults.DEFAULT_MODEL, "--target", help="target: zoo name (tiny; twin, its cost "
                                                                     "twin), local folder, or hub id")
DrafterOption = typer.Option(defaults.DEFAULT_MODEL, "--drafter", help="DFlash drafter: zoo name (tiny, "
                                                                       "twin), folder, or hub id")
DeviceOption = typer.Option(defaults.DEFAULT_DEVICE, "--device", help="cpu, cuda, cuda:N or auto")
DtypeOption = typer.Option(defaults.DEFAULT_DTYPE, "--dtype", help="auto (CUDA: bf16, CPU: fp32), float32, "
                                                          "bfloat16, float16")
ThreadsOption = typer.Option(
    defaults.DEFAULT_THREADS, "--threads", min=1, help="torch CPU threads for everything timed (recorded "
                                                       "with every timing)"
)
MaxNewTokensOption = typer.Option(defaults.MAX_NEW_TOKENS, min=2, help="tokens generated per prompt")
TemperatureOption = typer.Option(0.0, min=0.0, help="sampling temperature (0 = greedy)")
SeedOption = typer.Option(0, help="seed of the prompt sample, sampling and training")
DatasetOption = typer.Option(defaults.DATASET, help="prompt set name or a .jsonl/.txt file")
BenchPromptsOption = typer.Option(defaults.BENCH_PROMPTS, min=1, help="prompts (a seeded sample's first)")
BatchCostsOption = typer.Option(None, "--batch-costs", help="batch cost table for serving (`specpolicy bench "
                                                           "batch-latency --out FILE`, or a shipped aic-* or "
                                                           "torch-* table's name)")
ServerOption = typer.Option(None, "--server", help="the llama-server binary (default: "
                                                   "$SPECPOLICY_LLAMA_SERVER, PATH, or the one `specpolicy "
                                                   "engine build` cached)")
DraftSamplingOption = typer.Option(
    False, "--draft-sampling", help="sample drafts and verify them with speculative sampling (needs "
                                    "--temperature > 0)"
)


def policy_names(text: str) -> list[str]:
    """A ``--policies`` list split at commas, where a ``name=value`` piece continues the previous policy's
    arguments."""
    names: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if names and ":" in names[-1] and "=" in piece and ":" not in piece.split("=")[0]:
            names[-1] += f",{piece}"
        elif piece:
            names.append(piece)
    return names


def settings_from(cls: type[Settings], params: dict[str, Any], **parsed: Any) -> Settings:
    """The settings dataclass ``cls`` from a command's parameters (``locals()``) named as its fields, with
    ``parsed`` replacing those the command parsed first (e.g. a comma list into a tuple)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in params.items() if k in names} | parsed)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


FormatOption = typer.Option(OutputFormat.table, "--format", help="table, json, csv or markdown (tables fit "
                                                                 "100 columns; the others carry every "
                                                                 "field)")


def fail(message: str) -> typer.Exit:
    """Print ``message`` as an error on stderr; raise the returned exit."""
    stderr.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(code=2)


def check_out_file(out: Path | None, example: str) -> None:
    """Refuse an ``--out`` that is a folder (suggesting the file ``example`` in it) or lies under a file."""
    if out is None:
        return
    if out.is_dir():
        raise fail(f"--out {out} is a folder; pass a file path such as {out / example}")
    try:
        check_folder_path(out.parent, f"--out {out}'s folder", "pass a file path in a folder")
    except ValueError as error:
        raise fail(str(error)) from None


def warn_line(line: str) -> None:
    """A warning (as a flagged cost table's, :meth:`~specpolicy.costs.TableFile.flag_warnings`) on stderr."""
    stderr.print(f"[yellow]warning:[/] {escape(line)}", soft_wrap=True, highlight=False)


def check_draft_sampling(draft_sampling: bool, temperature: float) -> None:
    """Fail before loading anything on a non-finite temperature, or sampled drafts at T = 0."""
    check_temperature(temperature, "--temperature")
    if draft_sampling and temperature == 0:
        raise fail("--draft-sampling needs --temperature > 0 (at T = 0 drafts are argmax); add e.g. "
                   "--temperature 1")


def emit(rows: list[dict], fmt: OutputFormat, title: str | None = None,
         table_columns: int | None = None) -> None:
    """Write ``rows`` (same keys) to stdout as a table, JSON, CSV or Markdown; the table shows the first
    ``table_columns`` keys (default: all), the other formats every key."""
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    columns = list(rows[0].keys()) if rows else []
    if fmt is OutputFormat.csv:  # a list (an interval) is its JSON, as --format json writes it
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows)
        sys.stdout.write(buffer.getvalue())
        return
    if fmt is OutputFormat.markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
        sys.stdout.write("\n".join(lines) + "\n")
        return
    draw_table(rows, title, table_columns)


def draw_table(rows: list[dict], title: str | None = None, table_columns: int | None = None,
               console: Console | None = None) -> None:
    """``rows`` (same keys) as a table on ``console`` (default stdout; stderr beside a result), the first
    ``table_columns`` keys; a pipe or a file gets the width the environment names (COLUMNS, which rich
    reads), else ``defaults.TABLE_WIDTH``. Figures never break; names fold where the width runs out."""
    table, columns = Table(title=title), list(rows[0].keys())[:table_columns] if rows else []
    console = console or stdout
    if not console.is_terminal:
        width = None if os.environ.get("COLUMNS") else defaults.TABLE_WIDTH
        console = Console(file=console.file, width=width)
    for column in columns:
        table.add_column(column, overflow="fold",
                         no_wrap=all(re.fullmatch(r"[-<+\d.,x%/ ]*", str(row[column])) for row in rows))
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    console.print(table)
