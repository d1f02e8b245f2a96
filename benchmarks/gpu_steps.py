"""A measured reference for the serving tables: one engine step of an 8B target on this GPU, timed.

``python -m benchmarks.gpu_steps --out steps.json`` builds Llama-3.1-8B- and Qwen3-8B-shaped decoder stacks
with random bfloat16 weights (timing does not depend on the values; nothing is downloaded) and times, for each
batch size b, tokens per request w and cached context c, what a serving engine runs per step: every layer
(RMSNorm, fused QKV, attention over the request's cached keys with PyTorch's attention kernels, output
projection, RMSNorm, SwiGLU MLP) and the LM head over all b x w tokens, captured once as a CUDA graph and
replayed (no Python or launch overhead, as vLLM and SGLang run decode steps). Also timed: a DFlash drafter's
pass (5 such layers and the target's head over a block of w) and an EAGLE-3 head's (1 layer and a
32,000-token head over one token). Not timed: RoPE, sampling, the scheduler; so a real engine's step is this
plus its own overhead. Attention is unmasked (each of the w queries reads all c + w keys): the same bytes and
at most w x w more products than a causal verify.

Grouped-query attention is folded, not expanded: the query heads sharing a KV head are laid along the query
axis, so the kernel reads each cached key once, as an engine's does. Where batch x KV heads would leave most
of the GPU idle (decode at small batch), the keys are split into SPLITS chunks attended in parallel and merged
by their log-sum-exp (split-KV, as FlashAttention's and FlashInfer's decode kernels do); all cached keys are
read (the cache's whole length, c + 32).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

EAGLE_VOCABULARY = 32_000
SPLITS = 16
"""KV chunks per head where batch x KV heads is below half the GPU's multiprocessors"""
DFLASH_LAYERS = 5


@dataclass(frozen=True)
class Shape:
    """The decoder shape of a target (its Hugging Face config's numbers)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocabulary: int


SHAPES = {
    "llama-3.1-8b": Shape("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256),
    "qwen3-8b": Shape("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936),
}
GRID = {1024: (1, 2, 4, 8, 16, 32, 64, 128, 256), 8192: (1, 2, 4, 8, 16, 32, 64)}
"""cached context -> batch sizes timed (the KV cache of 128 requests at 8k does not fit beside the weights)"""
WIDTHS = (1, 2, 4, 8, 16, 32)


class Layer:
    """One decoder layer's weights: [in, out] matrices in bfloat16."""

    def __init__(self, shape: Shape, device: str, generator: torch.Generator) -> None:
        def weight(rows: int, cols: int) -> torch.Tensor:
            return torch.randn(rows, cols, device=device, dtype=torch.bfloat16, generator=generator) * 0.02

        q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
        self.shape = shape
        self.qkv = weight(shape.hidden, q + 2 * kv)
        self.out = weight(q, shape.hidden)
        self.gate_up = weight(shape.hidden, 2 * shape.intermediate)
        self.down = weight(shape.intermediate, shape.hidden)
        self.norms = torch.ones(2, shape.hidden, device=device, dtype=torch.bfloat16)

    def __call__(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                 context: int) -> torch.Tensor:
        """x: [b, w, hidden]; keys, values: [b, kv_heads, >= context + w, head_dim], written at context."""
        s = self.shape
        b, w, _ = x.shape
        group = s.heads // s.kv_heads
        qkv = F.rms_norm(x, (s.hidden,), self.norms[0]) @ self.qkv
        q, k, v = qkv.split([s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1)
        keys[:, :, context:context + w] = k.view(b, w, s.kv_heads, s.head_dim).transpose(1, 2)
        values[:, :, context:context + w] = v.view(b, w, s.kv_heads, s.head_dim).transpose(1, 2)
        q = q.view(b, w, s.kv_heads, group, s.head_dim).permute(0, 2, 3, 1, 4).reshape(b, s.kv_heads,
                                                                                        group * w, s.head_dim)
        attended = attention(q, keys, values)
        attended = attended.view(b, s.kv_heads, group, w, s.head_dim).permute(0, 3, 1, 2, 4).reshape(b, w, -1)
        x = x + attended @ self.out
        gate, up = (F.rms_norm(x, (s.hidden,), self.norms[1]) @ self.gate_up).chunk(2, -1)
        return x + (F.silu(gate) * up) @ self.down


def _flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(output [B, H, Lq, D], log-sum-exp [B, H, Lq]) of unmasked attention, PyTorch's flash kernel."""
    if q.is_cuda:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v)[:2]
    else:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    return out, lse


def attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """q: [b, kv, Lq, d] over keys, values: [b, kv, L, d] (L a multiple of SPLITS) -> [b, kv, Lq, d]."""
    b, kv, length, d = keys.shape
    processors = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 1
    if 2 * b * kv >= processors:
        return F.scaled_dot_product_attention(q, keys, values)  # PyTorch's pick of its kernels
    chunks = keys.view(b, kv * SPLITS, length // SPLITS, d), values.view(b, kv * SPLITS, length // SPLITS, d)
    queries = q.unsqueeze(2).expand(b, kv, SPLITS, *q.shape[2:]).reshape(b, kv * SPLITS, *q.shape[2:])
    out, lse = _flash(queries, *chunks)
    weights = torch.softmax(lse.view(b, kv, SPLITS, -1), dim=2).unsqueeze(-1).to(out.dtype)
    return (out.view(b, kv, SPLITS, -1, d) * weights).sum(2)


def timed_graph(run, repeats: int) -> float:
    """Median milliseconds of one replay of ``run`` captured as a CUDA graph (after warm-up replays)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return statistics.median(times)


def measure(shape: Shape, repeats: int, device: str = "cuda") -> dict:
    """verify[c][b][w], dflash[c][b][w] and eagle3[c][b] in milliseconds for the GRID and WIDTHS."""
    generator = torch.Generator(device=device).manual_seed(0)
    layers = [Layer(shape, device, generator) for _ in range(shape.layers)]
    head = torch.randn(shape.hidden, shape.vocabulary, device=device, dtype=torch.bfloat16,
                       generator=generator) * 0.02
    eagle_head = torch.randn(shape.hidden, EAGLE_VOCABULARY, device=device, dtype=torch.bfloat16,
                             generator=generator) * 0.02
    final_norm = torch.ones(shape.hidden, device=device, dtype=torch.bfloat16)
    result: dict = {"verify": {}, "dflash": {}, "eagle3": {}}
    for context, batches in GRID.items():
        for table in result.values():
            table[context] = {}
        for batch in batches:
            length = context + max(WIDTHS)
            cache = torch.zeros(2, shape.layers, batch, shape.kv_heads, length, shape.head_dim, device=device,
                                dtype=torch.bfloat16)

            def step(x: torch.Tensor, depth: int, weights: torch.Tensor, cache: torch.Tensor = cache,
                     context: int = context) -> torch.Tensor:
                for i in range(depth):
                    x = layers[i](x, cache[0, i], cache[1, i], context)
                return F.rms_norm(x, (shape.hidden,), final_norm) @ weights

            verify, dflash = {}, {}
            for width in WIDTHS:
                x = torch.randn(batch, width, shape.hidden, device=device, dtype=torch.bfloat16) * 0.1
                verify[width] = timed_graph(lambda x=x, step=step: step(x, shape.layers, head), repeats)
                dflash[width] = timed_graph(lambda x=x, step=step: step(x, DFLASH_LAYERS, head), repeats)
            x = torch.randn(batch, 1, shape.hidden, device=device, dtype=torch.bfloat16) * 0.1
            result["eagle3"][context][batch] = timed_graph(lambda x=x, step=step: step(x, 1, eagle_head),
                                                           repeats)
            result["verify"][context][batch], result["dflash"][context][batch] = verify, dflash
            print(f"{shape.name} c={context} b={batch}: verify " +
                  " ".join(f"{w}:{t:.2f}" for w, t in verify.items()) + " ms", flush=True)
            del cache, step
            torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file for the measured milliseconds")
    parser.add_argument("--models", default=",".join(SHAPES), help="comma-separated: " + ", ".join(SHAPES))
    parser.add_argument("--repeats", type=int, default=20, help="timed replays per point (median kept)")
    args = parser.parse_args()
    started = time.time()
    body = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "dtype": "bfloat16",
            "method": __doc__.split("\n\n")[0], "repeats": args.repeats, "models": {}}
    for name in args.models.split(","):
        body["models"][name] = {"shape": asdict(SHAPES[name]), **measure(SHAPES[name], args.repeats)}
        torch.cuda.empty_cache()
        with open(args.out, "w") as handle:  # after each model: a run cut short keeps what it measured
            json.dump(body, handle, indent=1)
    print(f"done in {time.time() - started:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
