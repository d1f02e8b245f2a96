"""``specpolicy bench gpu-check``: the shipped pair on an accelerator against the CPU float32 reference
(float32 equal, bfloat16 reported, replay equal to live, AR and B = 16 speed), a few minutes on one GPU."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specpolicy.data.prompts import Prompt, encode_prompts
from specpolicy.defaults import MAX_NEW_TOKENS, MAX_PROMPT_TOKENS, TRAINING_BLOCK_SIZE
from specpolicy.evaluation.metrics import cycles_agree

REPLAY_SIZES = (1, 4, 8, 16, 24)


@dataclass
class Check:
    """One line of the report: what was compared, whether it passed, and the numbers."""

    name: str
    passed: bool | None  # None: reported, not a pass/fail check
    detail: str

    def row(self) -> dict[str, str]:
        verdict = "-" if self.passed is None else ("ok" if self.passed else "FAIL")
        return {"check": self.name, "result": verdict, "detail": self.detail}


def _decode_all(pair, ids: list[list[int]], max_new_tokens: int, block_size: int = TRAINING_BLOCK_SIZE):
    from specpolicy.decoding import SpeculativeDecoder

    decoder = SpeculativeDecoder(pair.target, pair.drafter, max_new_tokens=max_new_tokens)
    return decoder, [decoder.generate(p, block_size) for p in ids]


def _mean_tau(traces) -> float:
    return sum(t.tau for t in traces) / max(1, len(traces))


def _replay_agrees(decoder, ids: list[list[int]], max_new_tokens: int) -> tuple[int, int]:
    """(cycles that agree, cycles compared) between exact replay and live decoding for REPLAY_SIZES."""
    from specpolicy.sweep.replay import build_replay

    agree = total = 0
    for prompt in ids:
        table, _ = build_replay(decoder, prompt, REPLAY_SIZES, max_new_tokens=max_new_tokens)
        for size in REPLAY_SIZES:
            same, compared, _ = cycles_agree(decoder.generate(prompt, size).cycles, table.simulate(size))
            agree, total = agree + same, total + compared
    return agree, total


def _speed(decoder, ids: list[list[int]]) -> str:
    from specpolicy.decoding import plain_decode

    ar = [plain_decode(decoder, p) for p in ids]
    spec = [decoder.generate(p, TRAINING_BLOCK_SIZE) for p in ids]
    ar_rate = sum(t.cycle_tokens for t in ar) / sum(t.decode_seconds for t in ar)
    spec_rate = sum(t.cycle_tokens for t in spec) / sum(t.decode_seconds for t in spec)
    return f"AR {ar_rate:.0f} tok/s, B=16 {spec_rate:.0f} tok/s ({spec_rate / ar_rate:.2f}x, measured)"


def gpu_check(device: str, prompts: Sequence[Prompt], max_new_tokens: int = MAX_NEW_TOKENS) -> list[Check]:
    """Run the module docstring's checks on ``device`` over ``prompts`` (reference: CPU float32)."""
    from specpolicy.models import load_pair

    reference_pair = load_pair("tiny", "tiny", "float32", "cpu")
    ids = encode_prompts(reference_pair.tokenizer, prompts, max_tokens=MAX_PROMPT_TOKENS)
    _, reference = _decode_all(reference_pair, ids, max_new_tokens)
    checks = []
    fp32 = load_pair("tiny", "tiny", "float32", device)
    decoder, traces = _decode_all(fp32, ids, max_new_tokens)
    same = sum(a.output_ids == b.output_ids for a, b in zip(traces, reference))
    checks.append(Check(f"{device} float32 outputs = CPU", same == len(ids), f"{same}/{len(ids)} prompts"))
    cycles = sum(cycles_agree(a.cycles, b.cycles)[2] is None for a, b in zip(traces, reference))
    checks.append(Check(f"{device} float32 cycles = CPU", cycles == len(ids), f"{cycles}/{len(ids)} prompts; "
                        f"tau {_mean_tau(traces):.4f} vs {_mean_tau(reference):.4f}"))
    agree, total = _replay_agrees(decoder, ids[: max(1, len(ids) // 2)], max_new_tokens)
    checks.append(Check(f"{device} replay = live", agree == total, f"{agree}/{total} cycles, B in "
                                                                   f"{REPLAY_SIZES}"))
    checks.append(Check(f"{device} float32 speed", None, _speed(decoder, ids)))
    bf16 = load_pair("tiny", "tiny", "bfloat16", device)
    _, low = _decode_all(bf16, ids, max_new_tokens)
    same = sum(a.output_ids == b.output_ids for a, b in zip(low, reference))
    checks.append(Check(f"{device} bfloat16 vs CPU float32", None, f"outputs equal on {same}/{len(ids)}; tau "
                        f"{_mean_tau(low):.4f} vs {_mean_tau(reference):.4f}"))
    return checks
