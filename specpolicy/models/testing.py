"""Tiny models for tests, docs and benchmarks (fp32, CPU): random weights, or a drafter distilled in seconds."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.models.dflash import DFlashDrafter
from specpolicy.models.drafter_loss import dflash_loss, sample_anchors, target_context


def make_target(vocab: int = 97, hidden: int = 32, layers: int = 3, eos: int = 3, seed: int = 0) -> Qwen3ForCausalLM:
    """A random Qwen3 causal LM; a wide init spreads logits apart so argmax ties are vanishingly rare."""
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4, max_position_embeddings=512,
        eos_token_id=eos, pad_token_id=0, bos_token_id=None, tie_word_embeddings=False, initializer_range=0.3,
    )
    return Qwen3ForCausalLM(config).eval()


def make_drafter(target: Qwen3ForCausalLM, layers: int = 2, block_size: int = TRAINING_BLOCK_SIZE, seed: int = 1,
                 mask_token_id: int | None = None) -> DFlashDrafter:
    """A random DFlash drafter shaped for ``target`` (mask token = last vocabulary id by default)."""
    torch.manual_seed(seed)
    t = target.config
    config = Qwen3Config(
        vocab_size=t.vocab_size, hidden_size=t.hidden_size, intermediate_size=t.intermediate_size,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=t.hidden_size // 4,
        max_position_embeddings=t.max_position_embeddings,
    )
    config.block_size = block_size
    config.num_target_layers = t.num_hidden_layers
    config.dflash_config = {"mask_token_id": t.vocab_size - 1 if mask_token_id is None else mask_token_id}
    drafter = DFlashDrafter(config)
    with torch.no_grad():
        for p in drafter.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    return drafter.eval()


def make_pair(**kwargs) -> tuple[Qwen3ForCausalLM, DFlashDrafter]:
    """A matched random target and drafter."""
    target = make_target(**kwargs)
    return target, make_drafter(target)


def distill(target: Qwen3ForCausalLM, drafter: DFlashDrafter, steps: int = 200, block_size: int = 8,
            seed: int = 0) -> DFlashDrafter:
    """Train ``drafter`` for a few seconds on ``target``'s greedy continuations of random prompts."""
    vocab = target.config.vocab_size
    generator = torch.Generator().manual_seed(seed)
    prompts = torch.randint(4, vocab - 1, (32, 6), generator=generator)
    sequences = target.generate(prompts, max_new_tokens=58, min_new_tokens=58, do_sample=False,
                                pad_token_id=target.config.pad_token_id)
    context = target_context(target, drafter, sequences)
    target.requires_grad_(False)
    drafter.train()
    optimizer = torch.optim.AdamW(drafter.parameters(), lr=3e-3)
    for _ in range(steps):
        rows = torch.randint(0, len(sequences), (8,), generator=generator)
        anchors = sample_anchors(torch.full((8,), sequences.shape[1]), torch.full((8,), 6), block_size, 8, generator)
        loss, _ = dflash_loss(drafter, target, sequences[rows], anchors, block_size, context=context[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return drafter.eval()


def make_trained_pair(steps: int = 200, block_size: int = 8) -> tuple[Qwen3ForCausalLM, DFlashDrafter]:
    """A 16-token target and a drafter distilled on its greedy continuations (a few seconds).

    Greedy decoding of such a target settles into patterns the drafter learns, so drafts are
    often accepted and the accept paths of the decoder get exercised.
    """
    target = make_target(vocab=16)
    return target, distill(target, make_drafter(target, block_size=block_size), steps, block_size)


def save_test_zoo(folder: Path, steps: int = 150) -> tuple[Path, Path]:
    """Write a loadable target (with a byte-level BPE tokenizer and chat template) and drafter.

    Returns (target folder, drafter folder); both work with ``--target``/``--drafter``.
    """
    from specpolicy.models.tokenizer import train_tokenizer

    folder = Path(folder)
    texts = ["def add(a, b):\n    return a + b", "The quick brown fox jumps over the lazy dog.",
             "Speculative decoding drafts tokens and verifies them.", "How do I sort a list in Python?"] * 20
    tokenizer = train_tokenizer(texts, folder / "target", vocab_size=300)
    target = make_target(vocab=len(tokenizer), eos=tokenizer.eos_token_id)
    target.config.pad_token_id = tokenizer.pad_token_id
    target.generation_config.eos_token_id = tokenizer.eos_token_id
    target.generation_config.pad_token_id = tokenizer.pad_token_id
    drafter = make_drafter(target, block_size=8, mask_token_id=tokenizer.convert_tokens_to_ids("<|MASK|>"))
    distill(target, drafter, steps, block_size=8)
    target.save_pretrained(str(folder / "target"))
    drafter.save_pretrained(folder / "drafter")
    return folder / "target", folder / "drafter"
