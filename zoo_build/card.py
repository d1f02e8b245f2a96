"""Measure the tiny zoo and write its model card (``python -m zoo_build card``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from specpolicy.defaults import MAX_PROMPT_TOKENS, PAPER_CANDIDATES
from specpolicy.defaults import TRAINING_BLOCK_SIZE as B16
from specpolicy.evaluation.report import save_figure
from specpolicy.policy import oracle_label

CARD_CANDIDATES = [4, 8, 12, 14, 15, 16, 17, 18, 20, 24, 32]
WINDOW = list(PAPER_CANDIDATES)
SAMPLE_PROMPTS = ["How do I reverse a list in Python?",
                  "Write a short email to my landlord about a broken heater.",
                  "What is the capital of France?"]


def tau_table(store) -> dict[int, float]:
    """Mean tau per candidate over a store's prompts."""
    means = store.tau_matrix(list(store.records())).mean(axis=0)
    return {b: float(m) for b, m in zip(store.candidates, means)}


def window_oracle(store, window=WINDOW) -> dict:
    """Per-prompt best block size within ``window``: histogram, share != 16, oracle gain over fixed 16."""
    records = list(store.records())
    taus = store.tau_matrix(records, window)
    best = [window[oracle_label(row, window)] for row in taus]
    fixed = taus[:, window.index(B16)].mean()
    oracle = taus.max(axis=1).mean()
    counts = Counter(best)
    return {"prompts": len(records), "histogram": {str(b): counts.get(b, 0) for b in window},
            "share_not_16": float(np.mean([b != B16 for b in best])), "tau_fixed16": float(fixed),
            "tau_oracle": float(oracle), "oracle_gain_percent": float(100 * (oracle / fixed - 1))}


def distinct_ngram_share(store, n: int = 4) -> float:
    """Mean over prompts of distinct n-grams / n-grams in the output: ~1 for varied text, low for loops."""
    shares = []
    for record in store.records():
        table = record.table()
        output = table.sequence[table.prompt_length : table.prompt_length + table.output_length]
        grams = [tuple(output[i : i + n]) for i in range(len(output) - n + 1)]
        if grams:
            shares.append(len(set(grams)) / len(grams))
    return float(np.mean(shares)) if shares else float("nan")


def shipped_validation_loss(target, tokenizer, run_dir: Path) -> float:
    """Validation loss of the weights as shipped (rounded to the zoo's storage dtype)."""
    from specpolicy.data.sharegpt import load_split
    from zoo_build.corpus import token_stream
    from zoo_build.train_target import TargetTrainArgs, validation_loss

    stream = token_stream(tokenizer, load_split("validation"), run_dir / "cache" / "validation_tokens.npy")
    return validation_loss(target, stream, TargetTrainArgs.seq_len)


def measure(run_dir: Path, prompts: int = 32, max_new_tokens: int = 128, out_dir: Path | None = None,
            bench_prompts: int = 8) -> dict:
    """Every number of the model card; sweeps are cached under ``out_dir`` (resumable)."""
    from benchmarks.decode import bench_decode
    from specpolicy.data.prompts import Prompt, encode_prompt, encode_prompts
    from specpolicy.data.registry import load_prompts
    from specpolicy.decoding import SpeculativeDecoder
    from specpolicy.models import load_pair
    from specpolicy.sweep.run import run_sweep
    from specpolicy.sweep.settings import SweepSettings

    out_dir = out_dir or run_dir / "card"
    pair = load_pair("tiny", "tiny")
    card: dict = {}
    summary_file = run_dir / "target_summary.json"
    if summary_file.exists():
        card["target"] = json.loads(summary_file.read_text())
    card["shipped_val_loss"] = shipped_validation_loss(pair.target, pair.tokenizer, run_dir)
    drafter_file = run_dir / "drafter_summary.json"
    if drafter_file.exists():
        card["drafter"] = {k: v for k, v in json.loads(drafter_file.read_text()).items() if k != "args"}
    timings = run_dir / "timings.json"
    if timings.exists():
        card["build_seconds"] = json.loads(timings.read_text())
    card["samples"] = []
    for temperature in (0.0, 1.0):
        decoder = SpeculativeDecoder(pair.target, pair.drafter, temperature=temperature, max_new_tokens=60)
        card["samples"] += [
            {"prompt": text, "temperature": temperature, "output": pair.tokenizer.decode(
                decoder.generate(encode_prompt(pair.tokenizer, Prompt.single("s", text)), B16).output_ids,
                skip_special_tokens=True)}
            for text in SAMPLE_PROMPTS]
    card["tau"], card["window_oracle"], card["distinct_4grams"], card["speed"] = {}, {}, {}, {}
    for dataset in ("sharegpt", "humaneval"):
        sweep_prompts = load_prompts(dataset, prompts, 0)
        bench_prompts_list = load_prompts(dataset, bench_prompts, 0)
        bench_ids = encode_prompts(pair.tokenizer, bench_prompts_list, max_tokens=MAX_PROMPT_TOKENS)
        for temperature in (0.0, 1.0):
            settings = SweepSettings(dataset=dataset, candidates=CARD_CANDIDATES, temperature=temperature,
                                     max_new_tokens=max_new_tokens, max_samples=prompts)
            store = run_sweep(settings, str(out_dir / f"{dataset}-T{temperature:g}"), sweep_prompts,
                              pair=pair)
            key = f"{dataset} T={temperature:g}"
            card["tau"][key] = tau_table(store)
            if dataset == "sharegpt" and temperature == 0:
                card["figure"] = str(plot_tau_per_block_size(store, out_dir / "tau-per-block-size.png"))
            card["window_oracle"][key] = window_oracle(store)
            card["distinct_4grams"][key] = distinct_ngram_share(store)
            result = bench_decode(pair.target, pair.drafter, bench_ids, B16, max_new_tokens, temperature)
            card["speed"][key] = dict(result.rows())
            if temperature > 0:
                result = bench_decode(pair.target, pair.drafter, bench_ids, B16, max_new_tokens, temperature,
                                      draft_sampling=True)
                card["speed"][f"{key} sampled drafts"] = dict(result.rows())
    return card


def render(card: dict) -> str:
    """The model card as Markdown."""
    lines = ["# The tiny zoo: model card", ""]
    target = card.get("target", {})
    lines += ["A Qwen3-architecture target (5.8 M parameters: 6 layers, hidden 256, 4 heads, vocabulary "
              "4,096 "
              "byte-level BPE) trained on the mostly-ASCII conversations of the ShareGPT training split, and "
              "a "
              "2-layer DFlash drafter (block size 16) trained on the target's own responses to training "
              "prompts, "
              "in the published DFlash checkpoint format. Rebuild from a checkout with "
              "`python -m zoo_build train`.", ""]
    if target:
        lines += [f"- target: {target.get('steps')} steps, validation loss {target.get('val_loss', 0):.3f} "
                  f"after training ({target.get('train_seconds', 0) / 60:.0f} min on 2 CPU cores)"]
    if "shipped_val_loss" in card:
        lines += [f"- validation loss of the shipped target weights: **{card['shipped_val_loss']:.3f}**"]
    drafter = card.get("drafter", {})
    if drafter:
        lines += [f"- drafter: {drafter.get('steps')} steps on {drafter.get('sequences')} target responses "
                  f"({drafter.get('train_seconds', 0) / 60:.0f} min)"]
    if "build_seconds" in card:
        steps = ", ".join(f"{k} {v:.0f}" for k, v in card["build_seconds"].items())
        lines += [f"- wall time per build step (s): {steps}"]
    lines += ["", "## Samples (B = 16, 60 tokens)", ""]
    for sample in card.get("samples", []):
        how = "greedy" if sample.get("temperature", 0) == 0 else f"T={sample['temperature']:g}, seed 0"
        lines += [f"**{sample['prompt']}** ({how})", "", "```text", sample["output"].strip()[:400], "```", ""]
    lines += ["## tau per block size (exact replay, 128 new tokens)", ""]
    header = list(next(iter(card["tau"].values())).keys())
    lines += ["| prompts | " + " | ".join(f"B={b}" for b in header) + " |", "|---|" + "---|" * len(header)]
    for key, row in card["tau"].items():
        lines.append(f"| {key} | " + " | ".join(f"{row[b]:.2f}" for b in header) + " |")
    lines += ["", "## Per-prompt best block size over {14, ..., 18}", "",
              "| prompts | n | 14 | 15 | 16 | 17 | 18 | share != 16 | tau fixed16 | tau oracle | oracle gain "
              "|",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, stats in card.get("window_oracle", {}).items():
        hist = stats["histogram"]
        lines.append(f"| {key} | {stats['prompts']} | " + " | ".join(str(hist[str(b)]) for b in WINDOW)
                     + f" | {100 * stats['share_not_16']:.0f}% | {stats['tau_fixed16']:.3f} | "
                       f"{stats['tau_oracle']:.3f} | +{stats['oracle_gain_percent']:.1f}% |")
    if card.get("distinct_4grams"):
        lines += ["",
                  "## Output diversity (distinct 4-grams / 4-grams per output, mean over the prompts above)",
                  "",
                  "| prompts | distinct 4-gram share |", "|---|---|"]
        lines += [f"| {k} | {v:.2f} |" for k, v in card["distinct_4grams"].items()]
    speed = card.get("speed", {})
    if speed and isinstance(next(iter(speed.values())), dict):
        keys = list(speed)
        lines += ["", "## Speed on this CPU (`python -m benchmarks decode`, 8 prompts x 128 tokens, B = 16)",
                  "",
                  "| metric | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
        lines += [f"| {metric} | " + " | ".join(str(speed[k].get(metric, "")) for k in keys) + " |"
                  for metric in speed[keys[0]]]
    return "\n".join(lines) + "\n"


def plot_tau_per_block_size(store, path: str | Path, max_lines: int = 40) -> Path:
    """tau against block size: one grey line per prompt (first ``max_lines``) and the mean in black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(store.candidates)
    records = list(store.records())
    taus = store.tau_matrix(records)
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in taus[:max_lines]:
        ax.plot(sizes, row, color="0.7", linewidth=0.8)
    ax.plot(sizes, taus.mean(axis=0), color="black", linewidth=2.5, marker="o", label="mean over prompts")
    ax.set_xlabel("block size B")
    ax.set_ylabel("tau")
    ax.set_xticks(sizes)
    ax.legend()
    return save_figure(fig, path)
