"""Rebuilds the shipped tiny zoo (maintainers only; not installed with specpolicy).

``python -m zoo_build train|publish|card`` from a checkout of the repository trains the tokenizer,
target and DFlash drafter with fixed seeds, swaps a finished run into ``specpolicy/zoo/tiny`` and
measures its model card; ``python -m zoo_build roofline`` writes the synthetic H200 batch cost table.
The installed package only reads the zoo (:mod:`specpolicy.zoo`).
"""

TOKENIZER_VOCAB = 4096
"""byte-level BPE vocabulary of the tiny target"""
ZOO_TARGET_STEPS = 2200
"""optimizer steps of the tiny target's schedule"""
ZOO_DRAFTER_STEPS = 2000
"""optimizer steps of the tiny drafter's schedule"""
ZOO_THREADS = 2
"""torch CPU threads while training the zoo"""
CARD_PROMPTS = 32
"""prompts per dataset and temperature in the zoo's model card"""
ROOFLINE_CONTEXT = 1024
"""context positions per sequence the synthetic roofline table prices passes after"""
DFLASH_DRAFTER_LAYERS = 5
"""layers of the published Qwen3 b16 DFlash drafters"""
