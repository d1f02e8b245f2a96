"""Tiny random models (fp32, CPU) for tests and `benchmarks decode --target random`; maintainers' tooling."""

from __future__ import annotations

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from specpolicy.defaults import TRAINING_BLOCK_SIZE
from specpolicy.models.dflash import DFlashDrafter


def make_target(vocab: int = 97, hidden: int = 32, layers: int = 3, eos: int = 3,
                seed: int = 0) -> Qwen3ForCausalLM:
    """A random Qwen3 causal LM; a wide init spreads logits apart so argmax ties are vanishingly rare."""
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4, max_position_embeddings=512,
        eos_token_id=eos, pad_token_id=0, bos_token_id=None, tie_word_embeddings=False, initializer_range=0.3,
    )
    return Qwen3ForCausalLM(config).eval()


def make_drafter(target: Qwen3ForCausalLM, layers: int = 2, block_size: int = TRAINING_BLOCK_SIZE,
                 seed: int = 1,
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
