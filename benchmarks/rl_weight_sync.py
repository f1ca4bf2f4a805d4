"""The GRPO loop of `cookbook/rl_transformer.py`: weights synced through RDMA vs a state_dict.

Prints one JSON report; asserts nothing. Run from the repository root:

    .venv/bin/python benchmarks/rl_weight_sync.py [--steps N] [--rounds N] [--quick]

Each round runs the recipe's loop (2 generator procs, 1 trainer proc, a 3.3 M-parameter
transformer) once with each sync method, in alternating order, on fresh procs:

* `rdma`: the trainer copies its weights into a registered slot (`publish`, inside its step) and
  both generators pull them with `RDMABuffer.read_into` (`sync`);
* `endpoint`: the trainer sends `state_dict()` to both generators in one endpoint call.

Per method, over the steps after `--warmup`: the loop's steps/s, and the weight sync's time per
step as the controller sees it (median and p90; the sync phase only, the generators' reads or the
trainer's send, each ending when both generators hold the new version), plus the trainer's
publish copy for `rdma`, and the sync's share of the loop's time. `ratios` gives endpoint/rdma for
the sync (with and without the publish copy counted on the RDMA side) and rdma/endpoint for
steps/s. Both methods run the same seeded computation, so `same_trajectory` checks they trained
identically, and `weights_match` that the generators held the trainer's weights bitwise at the
end of every run. The load (overall and per run) is `_report`'s `load_avg_1m_before`/
`load_avg_1m_after` (reports before it had `load_before`/`load_after`, the 1, 5 and 15-minute
averages).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

# Before any proc is spawned: the procs inherit it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cookbook"))

import rl_transformer as rl
import torch
from _report import LOAD_AFTER, LOAD_BEFORE, load_after, load_before

from monarch.rdma import RDMATcpFallbackWarning, get_rdma_backend

REPO = Path(__file__).resolve().parent.parent

METHODS = ("rdma", "endpoint")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _ms(values: list[float], q: float) -> float:
    """The q-quantile (0.5, 0.9) of `values` seconds, in ms (inclusive method)."""
    if len(values) == 1:
        return round(values[0] * 1e3, 3)
    cuts = statistics.quantiles(values, n=10, method="inclusive")
    return round((statistics.median(values) if q == 0.5 else cuts[int(q * 10) - 1]) * 1e3, 3)


def run_method(method: str, name: str, steps: int, warmup: int) -> dict[str, Any]:
    """One run of the loop with one sync method: its per-step records (after warm-up)."""
    before_load = load_before()
    started = time.perf_counter()
    run = rl.RLRun(method, name=name)
    try:
        records = [run.step(step) for step in range(warmup + steps)]
        match = run.weights_match()
    finally:
        run.stop()
    return {"records": records[warmup:], "all_rewards": [r["reward"] for r in records],
            "all_losses": [r["loss"] for r in records], "weights_match": match,
            "wall_s": round(time.perf_counter() - started, 2),
            **before_load, **load_after()}


def summarise(runs: list[dict[str, Any]], method: str) -> dict[str, Any]:
    records = [r for run in runs for r in run["records"]]
    sync = [r["sync_s"] for r in records]
    with_publish = [r["sync_s"] + r["publish_s"] for r in records]
    out = {
        "steps": len(records),
        "steps_per_s": round(len(records) / sum(r["step_s"] for r in records), 3),
        "sync_p50_ms": _ms(sync, 0.5),
        "sync_p90_ms": _ms(sync, 0.9),
        "step_p50_ms": _ms([r["step_s"] for r in records], 0.5),
        "generate_p50_ms": _ms([r["generate_s"] for r in records], 0.5),
        "train_p50_ms": _ms([r["train_s"] for r in records], 0.5),
        # What the sync can change in steps/s; the rest of a step is the same work either way,
        # so a steps/s ratio far from what this implies is the shared machine's noise.
        "sync_share_of_step": round(sum(sync) / sum(r["step_s"] for r in records), 4),
        "weights_match": all(run["weights_match"] for run in runs),
        "rounds": [{k: run[k] for k in ("wall_s", LOAD_BEFORE, LOAD_AFTER)} for run in runs],
    }
    if method == "rdma":
        out["publish_p50_ms"] = _ms([r["publish_s"] for r in records], 0.5)
        out["sync_with_publish_p50_ms"] = _ms(with_publish, 0.5)
        out["sync_with_publish_p90_ms"] = _ms(with_publish, 0.9)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="measured steps per run")
    parser.add_argument("--warmup", type=int, default=3, help="steps per run not measured")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each method")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 4 steps, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.warmup, args.rounds = 4, 1, 1
    if args.steps < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--steps and --rounds must be at least 1, --warmup at least 0")
    warnings.simplefilter("ignore", RDMATcpFallbackWarning)
    torch.set_num_threads(1)
    params = sum(p.numel() for p in rl.Policy().parameters())
    report: dict[str, Any] = {
        "workload": "GRPO loop, 2 generators + 1 trainer, weight sync per step",
        "commit": _commit(), "cpus": os.cpu_count(), **load_before(),
        "rdma_backend": get_rdma_backend(),
        "model": {"parameters": params, "bytes": params * 4, "layers": rl.LAYERS,
                  "d_model": rl.D_MODEL, "vocab": rl.VOCAB},
        "samples_per_step": 2 * rl.PROMPTS * rl.GROUP,
        "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
    }
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
    for round_ in range(args.rounds):
        # The machines are shared: alternating the order spreads load drift over both methods.
        for method in METHODS if round_ % 2 == 0 else METHODS[::-1]:
            print(f"[rl_weight_sync] round {round_} {method}", file=sys.stderr, flush=True)
            runs[method].append(run_method(method, f"bench-{method}-{round_}", args.steps,
                                           args.warmup))
    for method in METHODS:
        report[method] = summarise(runs[method], method)
    rdma, endpoint = report["rdma"], report["endpoint"]
    report["ratios"] = {
        "sync_p50_endpoint_over_rdma": round(endpoint["sync_p50_ms"] / rdma["sync_p50_ms"], 2),
        "sync_p50_endpoint_over_rdma_with_publish": round(
            endpoint["sync_p50_ms"] / rdma["sync_with_publish_p50_ms"], 2),
        "steps_per_s_rdma_over_endpoint": round(
            rdma["steps_per_s"] / endpoint["steps_per_s"], 3),
    }
    report["same_trajectory"] = all(
        (a["all_rewards"], a["all_losses"]) == (b["all_rewards"], b["all_losses"])
        for a, b in zip(runs["rdma"], runs["endpoint"]))
    report["reward_first_last"] = [runs["rdma"][0]["all_rewards"][0],
                                   runs["rdma"][0]["all_rewards"][-1]]
    report.update(load_after())
    print(json.dumps(report, indent=1), flush=True)


if __name__ == "__main__":
    main()
