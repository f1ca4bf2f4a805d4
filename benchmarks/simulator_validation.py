"""Validate the simulator against the real tensor engine on this machine; prints JSON.

Three training steps unlike the calibration probe (`simval_models.py`: an MLP, a pre-norm
transformer block, a small conv net; each forward, autograd backward, gradients averaged with
`reduce`, SGD in place, loss fetched), each at two batch sizes, run on a real 2-proc CPU mesh
and on `Simulator(1, 2)` under two profiles:

* `engine_profile(procs)`: calibrated through the real engine on the same procs;
* `"cpu"`: the procs-free profile (child processes micro-benchmark this machine).

Both calibrations use their own probe (odd-shaped `mm`, `add`, `mul`, all-reduces) and share no
operator or shape with the models. Per round, both profiles are calibrated afresh and then every
(model, batch) case is measured and predicted back to back, so calibration and measurement see
the same load; the rounds interleave the cases, and every figure is a median over steps and
then over rounds.

Time: the median wall time of a step (after warm-up) on the real mesh against the median
simulated iteration. Memory: the peak bytes of live storages on a worker during one step, read
from the real workers by a remote function that sums the distinct storages of the worker's
values after every command, against the simulator's peak of the same step. A hand-counted
program also checks the memory model exactly.

The load of each calibration and measurement is `_report`'s 1-minute average, `load_avg_1m`
(reports before it named it `load_average_1min`), and the whole run's `load_avg_1m_before`/
`load_avg_1m_after`.

Usage: .venv/bin/python benchmarks/simulator_validation.py [--rounds N] [--steps N]
       [--warmup N] [--size full|tiny] [--models mlp,transformer,convnet]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _report import load_after, load_avg_1m, load_before
from simval_models import MODELS, SIZES, train_step

DIM = "gpus"  # the real mesh's dimension; the simulated mesh's is "gpu"
TARGET = 0.30  # the median predicted/measured must be within this of 1


def _fetch(t: Any) -> Any:
    from monarch._src.tensor.fetch import fetch_shard

    return fetch_shard(t).result(timeout=120)


def _memory_probe() -> tuple[Callable[[], None], Callable[[], Any]]:
    """Two functions for the real workers (sent by value): `start()` wraps the worker's
    command execution to track the peak of live storage bytes from now on; `stop()` unwraps it
    and returns the peak as a 1-element int64 tensor."""

    def live_bytes(state: Any) -> int:
        seen, total = set(), 0
        for value in state.values.values():
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                if storage.data_ptr() not in seen:
                    seen.add(storage.data_ptr())
                    total += storage.nbytes()
        return total

    def start() -> None:
        from monarch._src.tensor.worker import current_state

        state = current_state()
        state.__dict__.pop("_execute", None)
        plain = state._execute
        box = {"peak": live_bytes(state)}

        def execute(cmd: Any) -> None:
            plain(cmd)
            box["peak"] = max(box["peak"], live_bytes(state))

        execute.box = box  # type: ignore[attr-defined]
        state._execute = execute

    def stop() -> Any:
        from monarch._src.tensor.worker import current_state

        state = current_state()
        box = state.__dict__.pop("_execute").box
        return torch.tensor([box["peak"]], dtype=torch.int64)

    return start, stop


def measure_real(procs: Any, model: Any, cfg: dict[str, int], batch: int, steps: int,
                 warmup: int) -> tuple[list[float], int]:
    """Real step times (seconds) and the peak live bytes of one step on worker 0."""
    from monarch import remote

    start, stop = _memory_probe()
    times = []
    with procs.activate():
        params = model.init(cfg)
        for _ in range(warmup):
            train_step(model, params, batch, cfg, DIM, _fetch)
        for _ in range(steps):
            t0 = time.perf_counter()
            train_step(model, params, batch, cfg, DIM, _fetch)
            times.append(time.perf_counter() - t0)
        remote(start, propagate=lambda: None)()
        train_step(model, params, batch, cfg, DIM, _fetch)
        peak = _fetch(remote(stop, propagate=lambda: torch.zeros(1, dtype=torch.int64))())
        del params
    return times, int(peak[0])  # outside activate(): a local tensor


def simulate(model: Any, cfg: dict[str, int], batch: int, steps: int, warmup: int,
             profile: Any) -> tuple[list[float], int, Any]:
    """Predicted step times, the predicted peak bytes of a step, and the simulator."""
    from monarch.simulator import Simulator

    sim = Simulator(1, 2, profile=profile, simulate_mode="simulate_with_report_only")
    with sim.mesh.activate():
        params = model.init(cfg)
        sim.step()
        for _ in range(warmup + steps):
            train_step(model, params, batch, cfg, "gpu", _fetch)
            sim.step()
        del params
    sim.mesh.exit()
    its = sim.iterations[1 + warmup:]
    return [it.time for it in its], max(it.peak_bytes for it in its), sim


def per_op_breakdown(sim: Any, rank: int = 0) -> dict[str, float]:
    """Simulated device seconds of one worker by operator name (for finding mis-predictions)."""
    totals: dict[str, float] = {}
    for task in sim.tasks(rank):
        totals[task.name] = totals.get(task.name, 0.0) + (task.end - task.start)
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def memory_check() -> dict[str, Any]:
    """Peak memory of a hand-countable program: predicted vs counted.

    Deletions reach the workers with the next batch the engine sends, so each phase ends
    with leaving `activate()` (which flushes) to make the order of frees and allocations
    deterministic.
    """
    from monarch.simulator import Simulator

    sim = Simulator(1, 2, profile="H100", simulate_mode="simulate_with_report_only")
    mib = 2**20
    with sim.mesh.activate():
        a = torch.zeros(1024, 256)  # 1 MiB
        v = a.view(256, 1024)  # a view: no new storage
        t = a.t()  # a view
        a.add_(1.0)  # in place: no new storage
        b = v * 2  # 1 MiB                                   live 2 MiB
        del v, t
    with sim.mesh.activate():
        c = torch.ones(512, 512, dtype=torch.float64)  # 2 MiB  live 4 MiB (the peak)
        del b
    with sim.mesh.activate():
        d = c[:10].clone()  # 10 * 512 * 8 bytes                live 3 MiB + 40 KiB
        e = d.relu()  # 40 KiB, then freed                      live 3 MiB + 80 KiB
        del e
        del a, c, d
    sim.mesh.exit()
    predicted = max(sim.peak_memory().values())
    final = [w.live for w in sim.session.model.workers]
    return {"predicted_peak_bytes": predicted, "known_peak_bytes": 4 * mib,
            "exact": predicted == 4 * mib and final == [0, 0], "final_live_bytes": final}


def _describe(profile: Any) -> dict[str, float]:
    return {
        "matmul_gflops_f32": profile.matmul_rate("float32") / 1e9,
        "small_matmul_gflops": (profile.small_matmul or (0, 0))[1] / 1e9,
        "elementwise_gflops": profile.elementwise_flops / 1e9,
        "memory_gbps": profile.memory_bandwidth / 1e9,
        "op_overhead_us": profile.op_overhead * 1e6,
        "worker_overhead_us": profile.worker_overhead * 1e6,
        "message_latency_us": profile.message_latency * 1e6,
        "gloo_step_latency_us": (profile.collective_latency or 0) * 1e6,
        "gloo_bandwidth_gbps": (profile.collective_bandwidth or 0) / 1e9,
    }


def validate(rounds: int, steps: int, warmup: int, size: str = "full",
             models: list[str] | None = None, breakdown: bool = False) -> dict[str, Any]:
    """Run the validation (see the module docstring); returns the report."""
    from monarch import remote
    from monarch._src.simulator.calibrate import engine_profile, threads_per_worker
    from monarch._src.simulator.profiles import cpu_profile
    from monarch.actor import this_host

    names = models or list(MODELS)
    cases = [(n, b) for n in names for b in SIZES[size][n][1]]
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {c: [] for c in cases}
    calibrations = []
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        with procs.activate():
            # Each worker uses its share of the cores as intra-op threads, as the CPU
            # profiles assume (see calibrate.threads_per_worker).
            threads = threads_per_worker(2, os.cpu_count() or 1)
            remote("torch.set_num_threads", propagate=lambda n: None)(threads)
        for r in range(rounds):
            load = load_avg_1m()
            profiles = {"engine": engine_profile(procs),
                        "cpu": cpu_profile(refresh=True, workers=2)}
            calibrations.append({"round": r, "load_avg_1m": load,
                                 **{k: _describe(p) for k, p in profiles.items()}})
            order = cases if r % 2 == 0 else cases[::-1]  # interleave against drift
            for name, batch in order:
                model = MODELS[name]
                cfg = SIZES[size][name][0]
                real, real_peak = measure_real(procs, model, cfg, batch, steps, warmup)
                entry: dict[str, Any] = {"round": r, "load_avg_1m": load_avg_1m(),
                                         "measured_step_s": statistics.median(real),
                                         "measured_peak_bytes": real_peak}
                for key, profile in profiles.items():
                    predicted, peak, sim = simulate(model, cfg, batch, steps, warmup, profile)
                    entry[f"predicted_step_s_{key}"] = statistics.median(predicted)
                    entry[f"predicted_peak_bytes_{key}"] = peak
                    if breakdown and r == 0:
                        entry[f"per_op_s_{key}"] = {
                            k: round(v, 7) for k, v in list(per_op_breakdown(sim).items())[:12]}
                samples[(name, batch)].append(entry)
    finally:
        procs.stop().get(timeout=60)
    return _summarise(cases, samples, calibrations, size, steps, warmup)


def _summarise(cases: list[tuple[str, int]], samples: dict[tuple[str, int], Any],
               calibrations: list[Any], size: str, steps: int, warmup: int) -> dict[str, Any]:
    out_cases = []
    ratios: dict[str, list[float]] = {}
    for name, batch in cases:
        rows = samples[(name, batch)]
        cfg = SIZES[size][name][0]
        measured = statistics.median(r["measured_step_s"] for r in rows)
        measured_peak = statistics.median(r["measured_peak_bytes"] for r in rows)
        case: dict[str, Any] = {"model": name, "batch": batch,
                                "what": MODELS[name].describe(cfg, batch),
                                "measured_step_s": measured,
                                "measured_peak_bytes": measured_peak}
        for key in ("engine", "cpu"):
            # Per round, predicted over measured (same load), then the median over rounds.
            t = statistics.median(r[f"predicted_step_s_{key}"] / r["measured_step_s"]
                                  for r in rows)
            m = statistics.median(r[f"predicted_peak_bytes_{key}"] / r["measured_peak_bytes"]
                                  for r in rows)
            case[key] = {
                "predicted_step_s": statistics.median(r[f"predicted_step_s_{key}"] for r in rows),
                "time_ratio": t,
                "predicted_peak_bytes": statistics.median(
                    r[f"predicted_peak_bytes_{key}"] for r in rows),
                "memory_ratio": m,
            }
            ratios.setdefault(f"{key}_time", []).append(t)
            ratios.setdefault(f"{key}_memory", []).append(m)
            if f"per_op_s_{key}" in rows[0]:
                case[key]["per_op_s_round0"] = rows[0][f"per_op_s_{key}"]
        case["rounds"] = [{k: v for k, v in r.items() if not k.startswith("per_op")}
                          for r in rows]
        out_cases.append(case)
    summary = {}
    for key, values in ratios.items():
        med = statistics.median(values)
        summary[key] = {"median_ratio": med, "min": min(values), "max": max(values),
                        "within_30_percent": abs(med - 1) <= TARGET}
    return {
        "setup": f"2 CPU procs (1 host), size {size!r}, {warmup} warm-up + {steps} timed "
                 "steps per case and round; ratio = predicted / measured",
        "summary": summary,
        "cases": out_cases,
        "calibrations": calibrations,
        "memory_hand_count": memory_check(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3,
                        help="calibrate, then measure and predict every case, this many times")
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated subset of {list(MODELS)}")
    parser.add_argument("--breakdown", action="store_true",
                        help="add the first round's simulated seconds per operator")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    unknown = set(models) - set(MODELS)
    if unknown:
        parser.error(f"unknown model(s) {sorted(unknown)}; choose from {list(MODELS)}")
    before = load_before()
    report = validate(args.rounds, args.steps, args.warmup, args.size, models, args.breakdown)
    report.update(before, **load_after())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
