"""Train the tiny zoo's DFlash drafter on the target's own responses (reads top to bottom).

Recipe (reference §2): frozen target with its embeddings and LM head; every training block is an
anchor followed by B-1 masks; anchors are resampled each step among response positions with room
for a block; loss weights exp(-(k-1)/gamma); AdamW, warmup 4%, cosine, grad clip 1.0.
Resumable: responses are generated in chunks and checkpoints saved every ``checkpoint_every`` steps.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config

from specpolicy.data.builtin import sharegpt_prompts
from specpolicy.data.prompts import encode_prompt
from specpolicy.decoding import SpeculativeDecoder
from specpolicy.defaults import MAX_PROMPT_TOKENS, TRAINING_BLOCK_SIZE
from specpolicy.models.dflash import DFlashDrafter
from specpolicy.zoo import SHIPPED_DTYPE
from zoo_build import ZOO_DRAFTER_STEPS, ZOO_THREADS
from zoo_build.checkpoint import Loop, cosine_lr, train_loop
from zoo_build.drafter_loss import dflash_loss, sample_anchors, target_context


@dataclass
class DrafterTrainArgs:
    run_dir: Path = Path("runs/zoo")
    """folder holding the trained target (``target/``); responses, checkpoints and logs go here too"""
    seed: int = 0
    """seed for prompt order, response sampling, initialisation and anchors"""
    num_layers: int = 2
    """drafter layers"""
    block_size: int = TRAINING_BLOCK_SIZE
    """training block size B"""
    gamma: float = 7.0
    """loss decay exp(-(k-1)/gamma)"""
    num_prompts: int = 2048
    """training prompts answered by the target"""
    max_prompt_tokens: int = 160
    """prompt tokens kept (the end of longer prompts)"""
    response_tokens: int = 192
    """tokens generated per response (greedy for even prompts, T=1 samples for odd ones)"""
    generation_batch: int = 64
    """prompts per generate call"""
    batch_size: int = 8
    """sequences per step"""
    anchors: int = 32
    """anchor blocks per sequence per step"""
    total_steps: int = ZOO_DRAFTER_STEPS
    """optimizer steps"""
    lr: float = 6e-4
    """peak learning rate"""
    checkpoint_every: int = 50
    """steps between checkpoints"""
    threads: int = ZOO_THREADS
    """torch CPU threads"""
    target_storage: str = SHIPPED_DTYPE
    """dtype the target ships in: its weights are rounded to it first, so the drafter, its responses and
    its held-out tau all use exactly the target users load"""
    bf16: bool = True
    """bfloat16 autocast for the target context and the drafter's forward/backward (weights stay fp32)"""


def build_drafter(target_config: Qwen3Config, mask_token_id: int, args: DrafterTrainArgs) -> DFlashDrafter:
    """A fresh drafter with the target's width and heads."""
    config = Qwen3Config(num_hidden_layers=args.num_layers, **{k: getattr(target_config, k) for k in (
        "vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
        "head_dim", "max_position_embeddings", "rms_norm_eps")})
    config.block_size = args.block_size
    config.num_target_layers = target_config.num_hidden_layers
    config.dflash_config = {"mask_token_id": mask_token_id}
    return DFlashDrafter(config)


@torch.no_grad()
def generate_responses(target, tokenizer, args: DrafterTrainArgs, out: Path) -> list[tuple[list[int], int]]:
    """(prompt + response ids, response start) per training prompt; cached and resumable per chunk."""
    chunks = out / "responses"
    chunks.mkdir(parents=True, exist_ok=True)
    prompts = sharegpt_prompts("train")
    order = np.random.default_rng(args.seed).permutation(len(prompts))[: args.num_prompts]
    encoded = [encode_prompt(tokenizer, prompts[i], args.max_prompt_tokens) for i in order]
    results: list[tuple[list[int], int]] = []
    for chunk_start in range(0, len(encoded), args.generation_batch):
        chunk_file = chunks / f"{chunk_start:06d}.json"
        if not chunk_file.exists():
            batch = encoded[chunk_start : chunk_start + args.generation_batch]
            rows = []
            for greedy in (True, False):
                part = [p for j, p in enumerate(batch) if (j % 2 == 0) == greedy]
                if not part:
                    continue
                width = max(len(p) for p in part)
                ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in part])
                starts = torch.tensor([width - len(p) for p in part]).unsqueeze(1)
                mask = (torch.arange(width) >= starts).long()
                torch.manual_seed(args.seed + chunk_start)
                gen = target.generate(ids, attention_mask=mask, max_new_tokens=args.response_tokens,
                                      do_sample=not greedy, temperature=None if greedy else 1.0, top_k=None,
                                      top_p=None, pad_token_id=tokenizer.pad_token_id)
                for p, row in zip(part, gen[:, width:].tolist()):
                    if tokenizer.eos_token_id in row:
                        row = row[: row.index(tokenizer.eos_token_id) + 1]
                    rows.append([p, row])
            chunk_file.write_text(json.dumps(rows))
            print(f"responses {chunk_start + len(batch)}/{len(encoded)}", flush=True)
        for prompt, response in json.loads(chunk_file.read_text()):
            results.append((prompt + response, len(prompt)))
    return results


def lr_at(step: int, args: DrafterTrainArgs) -> float:
    """Warmup over 4% of the steps, then cosine decay to zero."""
    return cosine_lr(step, args.total_steps, max(1, int(0.04 * args.total_steps)), args.lr)


def make_batch(data, rows: np.ndarray, args: DrafterTrainArgs, pad_id: int, generator: torch.Generator):
    """Right-padded ids [b, S] and anchors [b, A] for the chosen sequences."""
    seqs = [data[r] for r in rows]
    width = max(len(s) for s, _ in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, (s, _) in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    lengths = torch.tensor([len(s) for s, _ in seqs])
    first = torch.tensor([start for _, start in seqs])
    return ids, sample_anchors(lengths, first, args.block_size, args.anchors, generator)


@torch.no_grad()
def heldout_tau(target, drafter, tokenizer, prompts: int = 12,
                block_size: int = TRAINING_BLOCK_SIZE) -> float:
    """Mean tau at T = 0 on the first held-out ShareGPT prompts (128 new tokens)."""
    decoder = SpeculativeDecoder(target, drafter, max_new_tokens=128)
    taus = [decoder.generate(encode_prompt(tokenizer, p, MAX_PROMPT_TOKENS), block_size).tau
            for p in sharegpt_prompts("heldout")[:prompts]]
    return float(np.mean(taus))


def main(args: DrafterTrainArgs) -> Path:
    """Generate responses (resumable), train (resumable), save the drafter in DFlash format."""
    torch.set_num_threads(args.threads)
    run = args.run_dir
    target = AutoModelForCausalLM.from_pretrained(str(run / "target"), dtype=torch.float32).eval()
    target.to(getattr(torch, args.target_storage)).to(torch.float32)
    target.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(str(run / "target"))
    t_gen = time.time()
    data = [d for d in generate_responses(target, tokenizer, args, run / "cache")
            if len(d[0]) - d[1] >= args.block_size + 1]
    print(f"{len(data)} training sequences ({time.time() - t_gen:.0f}s)", flush=True)
    torch.manual_seed(args.seed)
    drafter = build_drafter(target.config, tokenizer.convert_tokens_to_ids("<|MASK|>"), args)
    optimizer = torch.optim.AdamW(drafter.parameters(), lr=args.lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    def loss_fn() -> tuple[torch.Tensor, dict]:
        ids, anchors = make_batch(data, rng.integers(0, len(data), args.batch_size), args,
                                  tokenizer.pad_token_id, generator)
        context = target_context(target, drafter, ids)
        loss, accuracy = dflash_loss(drafter, target, ids, anchors, args.block_size, args.gamma, context)
        return loss, {"acc1": round(accuracy[0].item(), 3),
                      "acc8": round(accuracy[7].item(), 3) if len(accuracy) > 7 else None}

    loop = Loop(args.total_steps, args.checkpoint_every, lambda step: lr_at(step, args),
                run / "drafter_ckpt" / "state.pt", run / "drafter_log.jsonl", args.bf16)
    step, seconds = train_loop(loop, drafter, optimizer, rng, loss_fn, generator)
    drafter.eval()
    out = run / "drafter"
    drafter.save_pretrained(out)
    summary = {"args": {k: str(v) for k, v in asdict(args).items()}, "steps": step,
               "train_seconds": round(seconds, 1), "sequences": len(data),
               "heldout_tau_b16": heldout_tau(target, drafter, tokenizer)}
    (run / "drafter_summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary), flush=True)
    return out
