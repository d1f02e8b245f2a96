"""Byte-level BPE tokenizer for the tiny zoo, with a chat template and the DFlash mask token."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from zoo_build import TOKENIZER_VOCAB

END_OF_TEXT = "<|endoftext|>"
TURN_START = "<|im_start|>"
TURN_END = "<|im_end|>"
MASK = "<|MASK|>"
SPECIAL_TOKENS = [END_OF_TEXT, TURN_START, TURN_END, MASK]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], out_dir: Path,
                    vocab_size: int = TOKENIZER_VOCAB) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and save it where ``AutoTokenizer`` can load it."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS),
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.add_special_tokens(SPECIAL_TOKENS)  # ids after the BPE vocabulary; MASK is the last id
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=TURN_END,
        pad_token=END_OF_TEXT,
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[TURN_START, MASK],
    )
    fast.chat_template = CHAT_TEMPLATE
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    return fast
