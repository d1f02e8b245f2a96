"""Every default in one place: library, CLI and docs read them from here (no torch, no I/O)."""

from __future__ import annotations

import os
from pathlib import Path

TRAINING_BLOCK_SIZE = 16
"""the block size the DFlash b16 drafters (and the zoo's) were trained at"""
PAPER_CANDIDATES = (14, 15, 16, 17, 18)
"""BlockPilot's window: the training block size +- 2 (the paper's default k = 2)"""
WIDE_CANDIDATES = (1, 2, 4, 8, 12, 16, 20, 24, 32)
"""the whole useful range, from B = 1 (no speculation) to twice the training block size"""
DEFAULT_CANDIDATES = WIDE_CANDIDATES
"""what sweeps, compare and training use unless told otherwise"""
SHIPPED_SWEEP_CANDIDATES = (1, 2, 4, 8, 12, 14, 15, 16, 17, 18, 20, 24, 32)
"""the shipped sweeps hold the wide set and the paper's window, so both evaluate from one store"""
MAX_BLOCK_SIZE = 64
"""largest block size accepted by sweeps, replay and the decoder's callers"""
MAX_PROMPT_TOKENS = 256
"""prompts are cut to their last this-many tokens"""
MAX_NEW_TOKENS = 128
"""output budget of sweeps, compare and benchmarks"""
GENERATE_MAX_NEW_TOKENS = 256
"""output budget of ``specpolicy generate`` and of a decoder built without one"""
DEFAULT_THREADS = 1
"""torch intra-op threads for anything timed (measured fastest and steadiest on the 2-core machines
this project is built on; see docs/benchmarks.md); every timing records the count it ran with"""
LATENCY_CONTEXT = 200
"""context length (tokens already cached) at which latency tables are measured"""
LATENCY_REPEATS = 15
"""interleaved repeats per block size in a latency table"""
MAX_LATENCY_SPREAD = 0.25
"""a latency table whose cycle costs vary more than this (relative IQR) is flagged as noisy"""
BLOCKPILOT_HIDDEN = 2048
"""BlockPilot's hidden width (the paper's)"""
BLOCKPILOT_DEPTH = 2
"""BlockPilot's linear layers before the output (1 = no residual block)"""
BLOCKPILOT_DROPOUT = 0.2
"""BlockPilot's dropout (the paper's)"""
BLOCKPILOT_LR = 1e-5
"""BlockPilot's Adam learning rate (the paper's)"""
BLOCKPILOT_EPOCHS = 100
"""upper bound on BlockPilot's epochs (early stopping ends most runs sooner)"""
BLOCKPILOT_BATCH_SIZE = 32
"""BlockPilot's minibatch size"""
PATIENCE = 15
"""epochs without validation improvement before a learned policy stops training"""
VALIDATION_SHARE = 0.2
"""share of training prompts held out (by a hash of their id) for early stopping"""
DEFAULT_POLICY = "blockpilot-guard"
"""what ``specpolicy generate`` decodes with: BlockPilot's per-prompt start, a cost-aware per-cycle guard"""


def cache_dir() -> Path:
    """Where sweeps run by compare and measured cost tables are kept (``SPECPOLICY_CACHE``, default
    ``~/.cache/specpolicy``)."""
    return Path(os.environ.get("SPECPOLICY_CACHE", Path.home() / ".cache" / "specpolicy")).expanduser()
