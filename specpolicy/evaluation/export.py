"""The configurations ``specpolicy export`` writes: a policy served at every concurrency and the vLLM and
SGLang configurations nearest it, each priced by simulating what the engine runs, or llama.cpp's servers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from specpolicy.defaults import LLAMACPP_VERSION
from specpolicy.engines.build import patched
from specpolicy.engines.llamacpp import SHARED, Setting, server_command
from specpolicy.evaluation.replay import check_policies
from specpolicy.evaluation.serving import StoredPrompts, evaluate_serving
from specpolicy.policy import Policy
from specpolicy.replay.batch_costs import BatchCostTable
from specpolicy.replay.export import EngineConfigPolicy, choose_sglang, choose_vllm, closest_configs
from specpolicy.sweep.store import SweepStore

SEMANTICS = ("the configurations run the policy as closely as each engine can: SGLang one block size (the "
             "policy's most run; no flags: speculation off), vLLM one drafted block of "
             "num_speculative_tokens + 1 (the policy's most run B > 1; null: the policy never drafts) "
             "verifying K + 1 per batch size (the L it verifies most there). Each engine's columns price "
             "exactly that configuration; read one back with --policies vllm-config:FILE or "
             "sglang-config:FILE. mlx-vlm (mlx_vlm.server) runs SGLang's block (its columns); dflash-mlx "
             "(dflash serve) drafts the checkpoint's block and verifies vLLM's batch-one L of it (vLLM's "
             "batch-one column; null where vLLM drafts another block or none).")

FIRST_PORT = 8081
"""the port of the first llama.cpp server an export writes (the next ones count up)"""


class _Pricer:
    """Serves a policy, or an engine configuration, at a batch size: (the run, speedup over plain AR), each
    configuration shape priced once (configurations share plans)."""

    def __init__(self, store: SweepStore, costs: BatchCostTable) -> None:
        self.store, self.costs, self.prompts = store, costs, StoredPrompts.load(store)
        self.priced: dict[tuple[int, int, int], tuple] = {}

    def served(self, policy: Policy, batch: int) -> tuple:
        seen: list = []
        [result] = evaluate_serving(self.store, [policy], self.costs, batch, prompts=self.prompts,
                                    on_served=lambda _, run: seen.append(run), prefills=False)  # decode tok/s
        return seen[0], result.speedup()

    def engine(self, config: object, batch: int) -> tuple:
        key = (*config.shape(batch), batch)
        if key not in self.priced:
            self.priced[key] = self.served(EngineConfigPolicy(config, self.store.candidates), batch)
        return self.priced[key]


def export_for_engines(built: Policy, store: SweepStore, costs: BatchCostTable, batches: Sequence[int],
                       drafter: str,
                       on_batch: Callable[[str], object] | None = None, fastest: bool = False) -> dict:
    """The document ``specpolicy export`` writes: ``built`` served at every concurrency and its closest vLLM
    and SGLang configurations, each priced; with ``fastest``, the fastest static ones for the store too."""
    check_policies([built], store)  # before reading the store
    costs.check_batches(batches, "--batch-sizes")
    pricer = _Pricer(store, costs)
    dynamic = {batch: pricer.served(built, batch) for batch in batches}
    vllm, sglang = closest_configs({batch: run.records for batch, (run, _) in dynamic.items()}, drafter)
    configs = {"vllm": vllm, "sglang": sglang}
    if fastest:
        def throughput(config, batch: int) -> float:
            return pricer.engine(config, batch)[0].throughput

        configs |= {"fastest_vllm": choose_vllm(store.candidates, batches, throughput, drafter),
                    "fastest_sglang": choose_sglang(store.candidates, batches, throughput, drafter)}
    rows = [_batch_row(built.name, batch, dynamic[batch], configs, pricer, on_batch) for batch in batches]
    document = {"policy": built.name, "per_batch_size": rows,
                "vllm_speculative_config": vllm.to_json() if vllm is not None else None,
                "sglang_args": sglang.args(), "mlx_vlm_args": sglang.args("mlx-vlm"),
                "dflash_mlx_args": vllm.dflash_mlx_args(pricer.prompts.records[0].training_block_size)
                if vllm else None,
                "semantics": SEMANTICS}
    if built.needs_sweep:
        document["note"] = (f"{built.name} plans from this sweep's measurements (an upper bound): the "
                            "configurations are the closest to what it chose on these prompts, not a "
                            "policy a server can run")
    if fastest:
        document["fastest_static"] = {"vllm_speculative_config": configs["fastest_vllm"].to_json(),
                                      "sglang_args": configs["fastest_sglang"].args(),
                                      "semantics": "the fastest static configuration of each engine for this "
                                                   "store, whatever the policy (columns fastest_*)"}
    return document


def _batch_row(policy: str, batch: int, dynamic: tuple, configs: dict, pricer: _Pricer,
               on_batch: Callable[[str], object] | None) -> dict:
    """One batch size's row: the policy's tokens/s and speedup, and each configuration's."""
    row = {"batch_size": batch, "policy_tokens_per_s": round(dynamic[0].throughput, 1),
           "policy_speedup_over_ar": round(dynamic[1], 3)}
    for name, config in configs.items():
        if config is not None:
            run, speedup = pricer.engine(config, batch)
            row |= {f"{name}_tokens_per_s": round(run.throughput, 1),
                    f"{name}_speedup_over_ar": round(speedup, 3)}
    if configs["vllm"] is not None:
        row["vllm_verified_drafts"] = configs["vllm"].verified(batch)
    if on_batch is not None:
        on_batch(f"concurrency {batch}: {policy} {row['policy_tokens_per_s']:.0f} tok/s; as exported: vLLM "
                 f"{row.get('vllm_tokens_per_s', '-')}, SGLang {row['sglang_tokens_per_s']} tok/s (modelled)")
    return row


def llamacpp_deployment(settings: list[Setting], binary: Path, target: Path, drafter: Path, threads: int,
                        per_prompt: str) -> dict:
    """What ``export --engine llamacpp`` writes: the server command lines (ports from 8081 up: a server per
    setting for a stock binary; for a patched one, one DFlash server, and plain decoding's where a prompt may
    be decoded plainly) and the rule routing each request with what it carries."""
    per_request = patched(binary)
    plain = Setting(1)
    started = [plain] * (plain in settings) + [SHARED] if per_request else sorted(settings)
    ports = range(FIRST_PORT, FIRST_PORT + len(started))
    servers = [{"setting": s.name, "block_size": s.block_size, "p_min": s.p_min,
                "url": f"http://127.0.0.1:{port}",
                "command": server_command(binary, target, drafter, s, threads, port)}
               for port, s in zip(ports, started)]
    chooser = f"specpolicy.registry.create_policy({per_prompt!r}).select(observation)"
    how = ("B = 1 to plain decoding's server, every other B a request to the one DFlash server with the "
           "fields below" if per_request else f"a stock llama.cpp {LLAMACPP_VERSION} takes no per-request "
                                             "speculation settings, so a setting is a server")
    routing = ("every request to the one server" if len(settings) == 1 else
               f"per request, after the target's prefill: the setting {per_prompt} selects ({chooser}); "
               f"{how}")
    requests = [{"setting": s.name, "speculative.n_max": s.block_size - 1, "speculative.p_min": s.p_min}
                for s in sorted(settings) if s != plain] if per_request else []
    return {"engine": "llama.cpp llama-server", "version": LLAMACPP_VERSION, "patched": per_request,
            "servers": servers, "routing": routing, **({"requests": requests} if requests else {})}
