"""Train the tiny zoo's target: a Qwen3 causal LM on ShareGPT chats (reads top to bottom).

Resumable: every ``checkpoint_every`` steps the model, optimizer and data RNG are saved under
``run_dir``; running the same command again continues from there.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from specpolicy.data.sharegpt import load_split
from zoo_build import ZOO_TARGET_STEPS, ZOO_THREADS
from zoo_build.checkpoint import Loop, cosine_lr, train_loop
from zoo_build.corpus import token_stream


@dataclass
class TargetTrainArgs:
    run_dir: Path = Path("runs/zoo")
    """folder for the tokenizer, token caches, checkpoints and logs"""
    seed: int = 0
    """seed for initialisation and batch sampling"""
    hidden_size: int = 256
    """model width"""
    num_layers: int = 6
    """decoder layers"""
    num_heads: int = 4
    """attention heads (head_dim = 64)"""
    num_kv_heads: int = 2
    """key/value heads"""
    intermediate_size: int = 768
    """MLP width"""
    seq_len: int = 256
    """training window in tokens"""
    batch_size: int = 16
    """windows per step"""
    total_steps: int = ZOO_TARGET_STEPS
    """optimizer steps of the whole schedule (warmup + cosine decay to 10%)"""
    lr: float = 2e-3
    """peak learning rate"""
    warmup_steps: int = 100
    """linear warmup"""
    checkpoint_every: int = 50
    """steps between checkpoints"""
    eval_every: int = 200
    """steps between validation-loss evaluations"""
    threads: int = ZOO_THREADS
    """torch CPU threads"""
    bf16: bool = True
    """bfloat16 autocast for forward/backward (about 2x faster on CPUs with AVX512-BF16; weights stay fp32)"""


def build_target(vocab_size: int, args: TargetTrainArgs, eos_id: int, pad_id: int) -> Qwen3ForCausalLM:
    """A fresh Qwen3 causal LM of the zoo's shape."""
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_hidden_layers=args.num_layers,
        num_attention_heads=args.num_heads,
        num_key_value_heads=args.num_kv_heads,
        head_dim=args.hidden_size // args.num_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
    )
    return Qwen3ForCausalLM(config)


def lr_at(step: int, args: TargetTrainArgs) -> float:
    """Warmup then cosine decay to 10% of the peak."""
    return cosine_lr(step, args.total_steps, args.warmup_steps, args.lr, floor=0.1)


def sample_windows(stream: np.ndarray, rng: np.random.Generator, batch: int, seq_len: int) -> torch.Tensor:
    """Random windows of ``seq_len + 1`` tokens: LongTensor [batch, seq_len + 1]."""
    starts = rng.integers(0, len(stream) - seq_len - 1, size=batch)
    return torch.from_numpy(np.stack([stream[s : s + seq_len + 1] for s in starts]).astype(np.int64))


@torch.no_grad()
def validation_loss(model: Qwen3ForCausalLM, stream: np.ndarray, seq_len: int, windows: int = 48) -> float:
    """Mean next-token loss on fixed, evenly spaced validation windows (the model's train/eval mode is
    kept)."""
    was_training = model.training
    model.eval()
    starts = np.linspace(0, len(stream) - seq_len - 2, windows).astype(np.int64)
    batch = torch.from_numpy(np.stack([stream[s : s + seq_len + 1] for s in starts]).astype(np.int64))
    losses = []
    for chunk in batch.split(16):
        out = model(input_ids=chunk[:, :-1], labels=chunk[:, :-1].clone())
        losses.append(out.loss.item())
    model.train(was_training)
    return float(np.mean(losses))


def main(args: TargetTrainArgs) -> Path:
    """Train (or resume) the target; returns the folder of the final model."""
    torch.set_num_threads(args.threads)
    run = args.run_dir
    tokenizer = AutoTokenizer.from_pretrained(str(run / "tokenizer"))
    train = token_stream(tokenizer, load_split("train"), run / "cache" / "train_tokens.npy")
    valid = token_stream(tokenizer, load_split("validation"), run / "cache" / "validation_tokens.npy")
    torch.manual_seed(args.seed)
    model = build_target(len(tokenizer), args, tokenizer.eos_token_id, tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(args.seed)

    def loss_fn() -> tuple[torch.Tensor, dict]:
        batch = sample_windows(train, rng, args.batch_size, args.seq_len)
        return model(input_ids=batch[:, :-1], labels=batch[:, :-1].clone()).loss, {}

    def evaluate(step: int, record: dict) -> None:
        if step % args.eval_every == 0 or step == args.total_steps:
            record["val_loss"] = round(validation_loss(model, valid, args.seq_len), 4)

    loop = Loop(args.total_steps, args.checkpoint_every, lambda step: lr_at(step, args),
                run / "target_ckpt" / "state.pt", run / "target_log.jsonl", args.bf16)
    step, seconds = train_loop(loop, model, optimizer, rng, loss_fn, on_step=evaluate)
    out = run / "target"
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    final = {"args": {k: str(v) for k, v in asdict(args).items()}, "steps": step,
             "train_seconds": round(seconds, 1),
             "val_loss": validation_loss(model, valid, args.seq_len)}
    (run / "target_summary.json").write_text(json.dumps(final, indent=2))
    return out
