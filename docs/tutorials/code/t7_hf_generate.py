"""Tutorial 7: a trained specpolicy policy inside transformers' own `generate()`."""

import time

import torch
from common import SAMPLES, WORKDIR
from transformers import AutoModelForCausalLM, AutoTokenizer, MuseGlimmerAssistantModel

from specpolicy import hf
from specpolicy.costs import CostTable
from specpolicy.data.prompts import encode_prompts
from specpolicy.data.registry import load_prompts
from specpolicy.zoo import DRAFTER_DIR, TARGET_DIR, ZOO_DIR

torch.set_num_threads(1)

# 1. Any Hugging Face causal LM, loaded the usual way (here the shipped tiny target).
target = AutoModelForCausalLM.from_pretrained(TARGET_DIR, dtype=torch.float32).eval()
tokenizer = AutoTokenizer.from_pretrained(TARGET_DIR)

# 2. A z-lab-layout DFlash drafter becomes transformers' DFlash assistant (and is saved as one).
hf.to_transformers_assistant(DRAFTER_DIR).save_pretrained(WORKDIR / "tiny-assistant")
assistant = MuseGlimmerAssistantModel.from_pretrained(WORKDIR / "tiny-assistant").eval()
print(f"assistant: {type(assistant).__name__}, block size {assistant.config.block_size}, "
      f"reads target layers {assistant.config.target_layer_ids}")

# 3. One held-out prompt, three ways: plain greedy, transformers' DFlash at B = 16, and the default
#    specpolicy policy (BlockPilot's first block size, then a cost-aware guard) choosing B every cycle.
costs = CostTable.load(ZOO_DIR / "sweeps" / "sharegpt" / "latency.json")  # this machine's cost table
prompts = encode_prompts(tokenizer, load_prompts("sharegpt", max(2, SAMPLES // 8), 0), max_tokens=256)
inputs = {"input_ids": torch.tensor([prompts[0]]), "max_new_tokens": 96, "do_sample": False}
inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
greedy = target.generate(**inputs)
dflash = target.generate(**inputs, assistant_model=assistant, speculation_type="dflash")
result = hf.generate(target, assistant, "blockpilot-guard", costs=costs, **inputs)
print("same output as greedy:", torch.equal(dflash, greedy), torch.equal(result.sequences, greedy))
print(f"blockpilot-guard: {len(result.cycles)} cycles, tau {result.tau:.2f}, "
      f"block sizes {result.block_sizes}")

# 4. Or attach the policy and keep calling generate() as before.
with hf.attach(target, "fixed8") as run:
    target.generate(**inputs, assistant_model=assistant, speculation_type="dflash")
print(f"attached fixed8: {len(run.cycles)} cycles, accepted drafts {[c.accepted for c in run.cycles]}")

# 5. Speed on held-out prompts, whole generate() calls at 1 thread, order alternated.
seconds = {"greedy": 0.0, "dflash B=16": 0.0, "blockpilot-guard": 0.0}
tokens = dict.fromkeys(seconds, 0)
for n, ids in enumerate(prompts):
    prompt = {**inputs, "input_ids": torch.tensor([ids]),
              "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    runs = {"greedy": lambda p=prompt: target.generate(**p),
            "dflash B=16": lambda p=prompt: target.generate(**p, assistant_model=assistant,
                                                            speculation_type="dflash"),
            "blockpilot-guard": lambda p=prompt: hf.generate(target, assistant, "blockpilot-guard",
                                                             costs=costs,
                                                             **p).sequences}
    for name in list(runs)[n % 3:] + list(runs)[: n % 3]:
        start = time.perf_counter()
        out = runs[name]()
        seconds[name] += time.perf_counter() - start
        tokens[name] += out.shape[1] - len(ids)
print(f"\n{len(prompts)} held-out prompts, measured (this machine, 1 thread):")
print(f"{'loop':<18}{'tok/s':>8}{'vs greedy':>11}")
for name in seconds:
    rate = tokens[name] / seconds[name]
    print(f"{name:<18}{rate:>8.0f}{rate / (tokens['greedy'] / seconds['greedy']):>10.2f}x")
