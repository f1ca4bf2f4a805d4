"""Validate the simulator against the real tensor engine on this machine; prints JSON.

1. Time: a small MLP training step (forward, hand-written backward, gradients averaged with
   `reduce`, SGD update, loss fetched) runs on a real 2-proc CPU mesh; the step time is the
   median of several steps after warm-up. The same step runs against `Simulator(1, 2,
   profile="cpu")`; the predicted step time is the median of its iterations. Calibration,
   measurement and prediction run back to back, `--rounds` times; the figure is the median
   ratio. The first round's real run is also recorded and replayed standalone.
2. Memory: a program whose allocations are known by hand (views, in-place ops, frees) runs on
   the simulator; its predicted peak must equal the hand count exactly.

Usage: .venv/bin/python benchmarks/simulator_validation.py [--steps N] [--warmup N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from typing import Any

import torch

BATCH, D_IN, D_HID, D_OUT = 32, 256, 256, 64
LR = 0.01
DIM = "gpus"  # the real mesh's dimension


def mlp_step(params: dict[str, Any], fetch: Any, dim: str) -> Any:
    """One data-parallel training step on the active mesh; returns the fetched loss tensor."""
    w1, w2 = params["w1"], params["w2"]
    x = torch.randn(BATCH, D_IN)
    y = torch.randn(BATCH, D_OUT)
    h = torch.relu(x @ w1)
    out = h @ w2
    diff = out - y
    loss = (diff * diff).mean()
    dout = diff * (2.0 / diff.numel())
    gw2 = h.t() @ dout
    dh = (dout @ w2.t()) * (h > 0)
    gw1 = x.t() @ dh
    gw1 = gw1.reduce(dim, reduction="avg")
    gw2 = gw2.reduce(dim, reduction="avg")
    w1.sub_(gw1 * LR)
    w2.sub_(gw2 * LR)
    return fetch(loss)  # the sync point of the step (a local tensor)


def _fetch(t: Any) -> Any:
    from monarch._src.tensor.fetch import fetch_shard

    return fetch_shard(t).result(timeout=60)


def measure_real(procs: Any, steps: int, warmup: int, history_path: str | None) -> list[float]:
    """Real step times (seconds) on the 2-proc CPU mesh `procs`, recording the command stream
    to `history_path` when given."""
    from monarch import remote
    from monarch._src.simulator.calibrate import threads_per_worker
    from monarch.simulator import record

    times = []
    with procs.activate():
        # Each worker uses its share of the cores as intra-op threads, as the CPU profile
        # assumes (see monarch._src.simulator.calibrate.threads_per_worker): oversubscribed
        # thread pools make operators wait at barriers for descheduled threads.
        threads = threads_per_worker(2, os.cpu_count() or 1)
        remote("torch.set_num_threads", propagate=lambda n: None)(threads)
        params = {"w1": torch.randn(D_IN, D_HID) * 0.05, "w2": torch.randn(D_HID, D_OUT) * 0.05}
        for _ in range(warmup):
            mlp_step(params, _fetch, DIM)
        recording = record(procs, history_path) if history_path else contextlib.nullcontext()
        with recording as rec:
            for _ in range(steps):
                t0 = time.perf_counter()
                mlp_step(params, _fetch, DIM)
                times.append(time.perf_counter() - t0)
                if rec is not None:
                    rec.step()
    return times


def simulate(steps: int, warmup: int, profile: Any = "cpu") -> tuple[list[float], Any]:
    """Predicted step times (seconds) of the same program under a CPU profile."""
    from monarch.simulator import Simulator

    sim = Simulator(1, 2, profile=profile, simulate_mode="simulate_with_report_only")
    mesh = sim.mesh
    with mesh.activate():
        params = {"w1": torch.randn(D_IN, D_HID) * 0.05, "w2": torch.randn(D_HID, D_OUT) * 0.05}
        sim.step()
        for _ in range(warmup + steps):
            mlp_step(params, _fetch, "gpu")  # the simulated mesh's dims are (host, gpu)
            sim.step()
    mesh.exit()
    return [it.time for it in sim.iterations[1 + warmup:]], sim


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
    expected = {"peak": 4 * mib, "after_all_deletes": 0}
    predicted = max(sim.peak_memory().values())
    final = [w.live for w in sim.session.model.workers]
    return {"predicted_peak_bytes": predicted, "known_peak_bytes": expected["peak"],
            "exact": predicted == expected["peak"] and final == [0, 0],
            "final_live_bytes": final}


def _describe(profile: Any) -> dict[str, float]:
    return {
        "matmul_gflops_f32": profile.matmul_rate("float32") / 1e9,
        "small_matmul_gflops": (profile.small_matmul or (0, 0))[1] / 1e9,
        "memory_gbps": profile.memory_bandwidth / 1e9,
        "worker_overhead_us": profile.worker_overhead * 1e6,
        "message_latency_us": profile.message_latency * 1e6,
        "gloo_step_latency_us": (profile.collective_latency or 0) * 1e6,
        "gloo_bandwidth_gbps": (profile.collective_bandwidth or 0) / 1e9,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5,
                        help="calibrate, measure and predict this many times, back to back")
    args = parser.parse_args()
    from monarch import remote
    from monarch._src.simulator.calibrate import engine_profile, threads_per_worker
    from monarch.actor import this_host
    from monarch.simulator import replay

    rounds = []
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                # Calibration, measurement and prediction in one window of time: the machine's
                # load changes by an order of magnitude from minute to minute.
                load = os.getloadavg()[0]
                with procs.activate():
                    threads = threads_per_worker(2, os.cpu_count() or 1)
                    remote("torch.set_num_threads", propagate=lambda n: None)(threads)
                profile = engine_profile(procs)
                history = f"{tmp}/mlp_history.pkl" if r == 0 else None
                real = measure_real(procs, args.steps, args.warmup, history)
                predicted, _ = simulate(args.steps, args.warmup, profile)
                real_med, pred_med = statistics.median(real), statistics.median(predicted)
                entry: dict[str, Any] = {
                    "load_average_1min": load,
                    "measured_step_s": real_med,
                    "predicted_step_s": pred_med,
                    "ratio": pred_med / real_med,
                }
                if history:
                    # The stand-alone micro-benchmark profile (no engine), and the replay of
                    # the recorded real run.
                    cpu_pred, _ = simulate(args.steps, args.warmup, "cpu")
                    entry["predicted_step_s_cpu_microbenchmark_profile"] = statistics.median(
                        cpu_pred)
                    entry["ratio_cpu_microbenchmark_profile"] = (
                        statistics.median(cpu_pred) / real_med)
                    replayed = [it.time for it in replay(history, profile=profile).iterations]
                    entry["replayed_step_s"] = statistics.median(replayed)
                entry.update({
                    "measured_steps_s": [round(x, 6) for x in real],
                    "predicted_steps_s": [round(x, 6) for x in predicted],
                    "engine_profile": _describe(profile),
                })
                rounds.append(entry)
    finally:
        procs.stop().get(timeout=60)
    ratio = statistics.median(r["ratio"] for r in rounds)
    out = {
        "step": f"MLP {BATCH}x{D_IN}->{D_HID}->{D_OUT}, 2 CPU procs, reduce(avg) of grads, "
                "fetch of loss",
        "median_ratio_predicted_over_measured": ratio,
        "within_30_percent": abs(ratio - 1) <= 0.30,
        "rounds": rounds,
        "memory": memory_check(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
