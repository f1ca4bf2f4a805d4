"""Micro-benchmarks behind the CPU profile, run where the workers would run.

`device_rates()` measures, in the calling process: matmul FLOP/s (a small and a large float32
product, and float64), memory bandwidth (a large copy), the elementwise rate, the fixed cost
of one eager operator, and the real tensor-engine worker's own overhead per command. Each is
timed over windows of back-to-back calls (see `WINDOW_S`): the workers run under the same load
as the benchmark, and a window includes the preemptions that load causes.

Several CPU workers on one machine compete for its cores (and their thread pools spin), so a
profile for `workers > 1` is measured by that many child processes (`python -m
monarch._src.simulator.calibrate`), each using its share of the cores as intra-op threads
(`threads_per_worker`), running the benchmarks at the same time; they also time gloo
all-reduces among themselves (a 4-byte one for latency, a 1 MB one for bandwidth, each call
after a few operators, as a worker meets them in a step) over the same loopback
`ProcessGroupGloo` the tensor engine uses. A run takes a few seconds.

`engine_profile(proc_mesh)` measures through a real tensor engine instead (see there).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.simulator.profiles import DeviceProfile

__all__ = [
    "actor_round_trip", "device_rates", "engine_profile", "measure_concurrently",
    "threads_per_worker",
]


# The calibration probe's shapes. They are deliberately odd (no power of two) so that the
# probe shares no operator shape with the workloads the simulator is validated on
# (benchmarks/simulator_validation.py): a small product (M, K) @ (K, N), a large square one,
# an elementwise operator over ELEMENTS values, and all-reduces of 4 bytes and of
# REDUCE_ELEMENTS float32 values (about 1 MB).
PROBE_SMALL_MM = (24, 200, 360)
PROBE_LARGE_MM = 300
PROBE_ELEMENTS = 1_000_000
PROBE_REDUCE_ELEMENTS = 250_000


def threads_per_worker(workers: int, cores: int) -> int:
    """Intra-op threads each of `workers` CPU workers should use on `cores` cores.

    More threads than cores in total makes every parallel operator wait for descheduled
    threads at its barriers (on a loaded 2-core machine a 4-MFLOP matmul went from 2 ms to
    100 ms), so CPU profiles for several workers are measured with this many threads per
    worker, and workers should be configured the same (`torch.set_num_threads`).
    """
    return max(1, cores // max(workers, 1))


def _median(fn: Callable[[], Any], repeat: int) -> float:
    """The median wall time of `fn` over `repeat` runs, after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# Rates are measured over windows about as long as a few operators of a training step: a
# machine's other load preempts the workers in proportion to their run time, and the median of
# single short calls would leave those preemptions out (each call is rarely the one preempted),
# predicting an idle machine's speed for a loaded one.
WINDOW_S = 0.03


def _throughput(fn: Callable[[], Any], repeat: int = 3, window: float = WINDOW_S) -> float:
    """Seconds per call of `fn`: the median over `repeat` windows of back-to-back calls lasting
    at least `window` seconds each, after one warm-up call."""
    fn()
    per_call = []
    for _ in range(repeat):
        calls, t0 = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= window:
                break
        per_call.append(elapsed / calls)
    return statistics.median(per_call)


def device_rates() -> dict[str, float]:
    """Rates of this process's CPU under the current load (see the module docstring)."""
    import torch

    with torch.inference_mode():
        n = PROBE_LARGE_MM
        a32 = torch.randn(n, n)
        a64 = a32.double()
        flops = 2 * n**3
        m, k, k_n = PROBE_SMALL_MM
        s1, s2 = torch.randn(m, k), torch.randn(k, k_n)
        small_flops = 2 * m * k * k_n
        big = torch.empty(4 * 2**20)  # 16 MiB
        dst = torch.empty_like(big)
        tiny = torch.ones(4)
        op = torch.ops.aten.add.Tensor
        reps = 200
        ew_src = torch.ones(PROBE_ELEMENTS)
        op_cost = _throughput(lambda: [op(tiny, tiny) for _ in range(reps)]) / reps
        # The engine keeps an operator's output until the controller deletes it, so
        # consecutive outputs are fresh memory: keep a batch of them alive, as it does.
        ew_batch = 4
        rates = {
            "mm32": flops / _throughput(lambda: torch.mm(a32, a32)),
            "mm64": flops / _throughput(lambda: torch.mm(a64, a64)),
            "mm_small": small_flops / _throughput(lambda: torch.mm(s1, s2)),
            "mm_small_flops": float(small_flops),
            "mm_large_flops": float(flops),
            "bandwidth": 2 * big.nbytes / _throughput(lambda: dst.copy_(big)),
            "op_overhead": op_cost,
            "elementwise": ew_src.numel() / max(
                _throughput(lambda: [ew_src.mul(2.0) for _ in range(ew_batch)]) / ew_batch
                - op_cost, 1e-9),
        }
    rates["worker_overhead"] = _measure_worker_overhead()  # outside inference mode, as a worker
    return rates


def _measure_worker_overhead(n: int = 200) -> float:
    """Seconds the real tensor-engine worker spends per command beyond the operator itself
    (measured where the workers would run: in each calibration child at the same time)."""
    import torch

    from monarch._src.tensor.commands import CallOp, OpMeta, Ref, TensorMeta
    from monarch._src.tensor.worker import WorkerState

    state = WorkerState("calibration", 0, 1, ("127.0.0.1", 1), 1.0)
    x = torch.ones(4)
    state.values[1] = x
    meta = OpMeta("aten::add.Tensor", (TensorMeta((4,), "torch.float32", "cpu"),) * 2,
                  (TensorMeta((4,), "torch.float32", "cpu"),))
    cmds = [CallOp(i, None, "main", "aten::add.Tensor", (Ref(1), Ref(1)), {}, (1,), (2,), meta)
            for i in range(n)]
    through_worker = _throughput(lambda: state.run(cmds)) / n
    op = torch.ops.aten.add.Tensor
    direct = _throughput(lambda: [op(x, x) for _ in range(n)]) / n
    return max(through_worker - direct, 0.0)


def actor_round_trip(rounds: int = 30) -> float:
    """Median round trip of an actor call to this very process (the thread hand-offs of a
    monarch message, without the socket)."""
    from monarch._src.mesh.actor import Actor, endpoint
    from monarch._src.mesh.proc_mesh import this_proc

    class _Echo(Actor):
        @endpoint
        def ping(self) -> int:
            return 1

    mesh = this_proc().spawn("simulator_calibration_echo", _Echo)
    try:
        mesh.ping.call_one().get(timeout=30)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            mesh.ping.call_one().get(timeout=30)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    finally:
        mesh.stop().get(timeout=30)


def _child(rank: int, world: int, port: int) -> None:
    """One calibration process: join the group, benchmark in step with the others, report.

    The group is the tensor engine's own (`GroupCache`: loopback gloo over the parent's store).
    """
    import os

    import torch

    from monarch._src.tensor.groups import GroupCache

    torch.set_num_threads(threads_per_worker(world, os.cpu_count() or 1))
    groups = GroupCache("calibrate", rank, ("127.0.0.1", port), timeout=60.0)
    pg = groups.get(tuple(range(world)), torch.device("cpu"))
    small = torch.ones(1)
    pg.allreduce([small]).wait()  # everyone is up: start together
    rates = device_rates()
    pg.allreduce([small]).wait()
    big = torch.ones(PROBE_REDUCE_ELEMENTS)
    rates["allreduce_small"] = _collective_between_work(lambda: pg.allreduce([small]).wait(),
                                                        30)
    rates["allreduce_big"] = _collective_between_work(lambda: pg.allreduce([big]).wait(), 30)
    rates["allreduce_big_bytes"] = float(big.nbytes)
    sys.stdout.write(json.dumps(rates) + "\n")
    sys.stdout.flush()


def _collective_between_work(collective: Callable[[], Any], calls: int) -> float:
    """Mean seconds of `collective`, each call preceded by some operators (a few small
    products), as a worker runs collectives between a step's operators: a member that was
    preempted during the work arrives late, and the others wait for it in the collective."""
    import torch

    m, k, k_n = PROBE_SMALL_MM
    a, b = torch.randn(m, k), torch.randn(k, k_n)
    collective()
    spent = 0.0
    for _ in range(calls):
        for _ in range(8):
            torch.mm(a, b)
        t0 = time.perf_counter()
        collective()
        spent += time.perf_counter() - t0
    return spent / calls


def measure_concurrently(workers: int, timeout: float = 120.0) -> list[dict[str, float]]:
    """Run the benchmarks in `workers` child processes at once; their results, by rank."""
    import datetime
    import os
    import subprocess

    from torch._C._distributed_c10d import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                     timeout=datetime.timedelta(seconds=timeout), use_libuv=True)
    env = dict(os.environ, MONARCH_PRESTART="0")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "monarch._src.simulator.calibrate", str(r), str(workers),
             str(store.port)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for r in range(workers)
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(
                    f"CPU profile calibration process failed (status {p.returncode}):\n{err}"
                )
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


if __name__ == "__main__":
    _child(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))


def engine_profile(procs: ProcMesh, repeat: int = 7) -> DeviceProfile:
    """A CPU `DeviceProfile` measured through a REAL tensor engine on `procs` (a proc mesh of
    CPU workers): fetch round trips (message latency), tiny operators (the engine's overhead
    per command), small and large matmuls, a large elementwise operator (bandwidth) and
    all-reduces of 4 bytes and 1 MB (collective latency and bandwidth), each as the median of
    `repeat` timed batches. Takes a second or two on an idle machine.

    This measures the device and the engine, not any particular program: a simulation with
    this profile still composes the program's own operators and collectives.
    """
    import dataclasses

    import torch

    from monarch._src.simulator.profiles import cpu_profile
    from monarch._src.tensor.collectives import reduce
    from monarch._src.tensor.fetch import fetch_shard

    with procs.activate():
        probe = torch.ones(4)
        m, k, k_n = PROBE_SMALL_MM
        n_large = PROBE_LARGE_MM
        a, b = torch.randn(m, k), torch.randn(k, k_n)
        w = torch.randn(n_large, n_large)
        vec = torch.ones(PROBE_ELEMENTS)
        big_buf = torch.ones(PROBE_REDUCE_ELEMENTS)
        dim = _first_dim(procs)
        # Warm up everything first (the first collective creates the process group).
        fetch_shard([probe + 1, a @ b, w @ w, vec * 2, reduce(probe, dim),
                     reduce(big_buf, dim)]).result(timeout=60)

        def once(make: Callable[[], Any]) -> float:
            t0 = time.perf_counter()
            fetch_shard(make()).result(timeout=60)
            return time.perf_counter() - t0

        def extra(make: Callable[[], Any], times: int = repeat,
                  base: Callable[[], Any] = lambda: probe) -> float:
            """Median of (`make` + fetch) - (`base` + fetch), measured in adjacent pairs so
            that the machine's changing load cancels."""
            diffs = []
            for _ in range(times):
                before = once(base)
                diffs.append(once(make) - before)
            return max(statistics.median(diffs), 1e-7)

        round_trip = statistics.median(once(lambda: probe) for _ in range(2 * repeat + 1))
        tiny_n = 50
        per_cmd = extra(lambda: [probe + 1 for _ in range(tiny_n)][-1]) / tiny_n
        mm_n = 10
        small_t = max(extra(lambda: [a @ b for _ in range(mm_n)][-1][0, :1]) / mm_n - per_cmd,
                      1e-7)
        big_n = 4
        large_t = max(extra(lambda: [w @ w for _ in range(big_n)][-1][0, :1]) / big_n - per_cmd,
                      1e-7)
        ew_n = 4
        ew_t = max(extra(lambda: [vec * 2 for _ in range(ew_n)][-1][:1]) / ew_n - per_cmd, 1e-7)
        # Against a one-command batch, which wakes every worker as the collective's batch
        # does: the difference is the collective, including the workers' skew in arriving.
        touch = lambda: probe + 1  # noqa: E731
        small_red = extra(lambda: reduce(probe, dim), 2 * repeat + 1, touch)
        big_red = max(extra(lambda: reduce(big_buf, dim)[:1], 2 * repeat + 1, touch) - per_cmd,
                      1e-7)
    base = cpu_profile()
    n = procs.extent.nelements
    # The engine's reduce is two all-reduces (the members' agreement on failed inputs, then
    # the data), each of 2(n - 1) ring steps: the 4-byte one is all latency.
    steps = 2 * (n - 1)
    latency = small_red / (2 * steps)
    moved = 2 * (n - 1) / n * big_buf.nbytes
    spread = big_red - small_red  # the 1 MB all-reduce's extra time: its bandwidth term
    bandwidth = moved / spread if spread > 1e-6 else None  # lost in the noise: default
    small_flops, large_flops = 2 * m * k * k_n, 2 * n_large**3
    return dataclasses.replace(
        base,
        name=f"cpu (engine, {n} workers)",
        matmul_flops={"float32": large_flops / large_t, "float64": large_flops / large_t / 2,
                      "bfloat16": large_flops / large_t / 4, "float16": large_flops / large_t / 4},
        default_matmul_flops=large_flops / large_t,
        small_matmul=(float(small_flops), small_flops / small_t),
        large_matmul_flops=float(large_flops),
        elementwise_flops=vec.numel() / ew_t,
        memory_bandwidth=2 * vec.nbytes / ew_t,
        op_overhead=0.0,
        worker_overhead=per_cmd,
        message_latency=max(round_trip - per_cmd, 0.0) / 2,
        collective_latency=latency,
        collective_bandwidth=bandwidth,
    )


def _first_dim(procs: ProcMesh) -> str:
    labels = list(procs.extent.labels)
    if not labels:
        raise ValueError("engine_profile() needs a proc mesh with at least one dimension.")
    return labels[-1]
