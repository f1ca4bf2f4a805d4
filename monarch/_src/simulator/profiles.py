"""Device profiles: what one worker's device can do, for the cost model.

A profile gives peak dense FLOP/s per dtype (matmul-class operators), the rate of elementwise
arithmetic, memory bandwidth, the fixed cost of one operator (kernel launch on a GPU, dispatch on
a CPU), the worker's own per-command overhead, and controller-side costs (serialising and sending
a batch of commands, the round trip of a fetch). `H100` and `H200` are built in (vendor dense
peaks scaled by an achievable fraction); `cpu_profile()` measures this machine once per process
with a micro-benchmark that takes well under a second, and caches the result.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import threading
from typing import Any

from monarch._src.simulator.calibrate import _median

__all__ = ["H100", "H200", "DeviceProfile", "cpu_profile", "get_profile"]


@dataclasses.dataclass(frozen=True)
class DeviceProfile:
    """Rates and overheads of one worker's device; every time is in seconds.

    `matmul_flops` maps a dtype name ("float32", "bfloat16", ...) to sustained dense FLOP/s of
    matmul-class operators; `default_matmul_flops` covers dtypes not listed. `synchronous` is
    True when the device is the worker's own CPU thread (an op blocks the worker until it ends).
    """

    name: str
    kind: str  # "gpu" or "cpu"
    matmul_flops: dict[str, float]
    default_matmul_flops: float
    elementwise_flops: float
    memory_bandwidth: float  # bytes/s, read + write traffic
    op_overhead: float  # fixed cost of one operator on the device (launch, dispatch)
    worker_overhead: float  # the worker's host-side handling of one command
    batch_overhead: float  # controller: serialise and post one batch of commands
    command_overhead: float  # controller: serialise one command inside a batch
    message_latency: float  # one controller <-> worker message, one way
    memory_capacity: int  # bytes of device memory (for reports; exceeding is flagged)
    synchronous: bool
    # Small matmuls run below peak: (FLOPs, FLOP/s) measured on a small product; rates are
    # interpolated (log-log) between it and the large-operator rate at `large_matmul_flops`.
    small_matmul: tuple[float, float] | None = None
    large_matmul_flops: float = 0.0
    # Fraction of the device one worker gets (CPU workers sharing this machine's cores).
    share: float = 1.0
    cores: int = 0
    # Measured collective figures (CPU profiles for several workers): seconds per ring step
    # and bytes/s per link; None: use the CommModel defaults.
    collective_latency: float | None = None
    collective_bandwidth: float | None = None

    def matmul_rate(self, dtype: str, flops: float | None = None) -> float:
        """Sustained matmul FLOP/s for `dtype` (a name such as "float32" or "torch.float32"),
        for an operator of `flops` FLOPs when given."""
        key = dtype.replace("torch.", "")
        rate = self.matmul_flops.get(key, self.default_matmul_flops)
        small = self.small_matmul
        if flops is not None and small is not None and key in ("float32", "float64"):
            f_small, r_small = small
            if key == "float64":
                r_small *= self.matmul_flops.get("float64", rate) / self.matmul_flops.get(
                    "float32", rate)
            if flops <= f_small:
                rate = r_small
            elif flops < self.large_matmul_flops and r_small < rate:
                import math

                frac = math.log(flops / f_small) / math.log(self.large_matmul_flops / f_small)
                rate = math.exp(math.log(r_small) + frac * (math.log(rate) - math.log(r_small)))
        return rate * self.share

    def with_overrides(self, **changes: Any) -> DeviceProfile:
        """A copy with some fields changed (e.g. `memory_bandwidth=2e12`)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(
                f"DeviceProfile has no field(s) {sorted(unknown)}; valid fields are "
                f"{[f.name for f in dataclasses.fields(self)]}."
            )
        return dataclasses.replace(self, **changes)


# Achievable fraction of vendor dense peaks for large, well-shaped operators.
_MATMUL_EFFICIENCY = 0.7
_BANDWIDTH_EFFICIENCY = 0.8


def _gpu(name: str, tensor_tf32: float, half: float, fp8: float, fp32: float, bw: float,
         capacity_gib: int) -> DeviceProfile:
    e = _MATMUL_EFFICIENCY
    return DeviceProfile(
        name=name,
        kind="gpu",
        matmul_flops={
            "float32": tensor_tf32 * e,
            "bfloat16": half * e,
            "float16": half * e,
            "float8_e4m3fn": fp8 * e,
            "float8_e5m2": fp8 * e,
            "float64": fp32 * e,
        },
        default_matmul_flops=fp32 * e,
        elementwise_flops=fp32 * e,
        memory_bandwidth=bw * _BANDWIDTH_EFFICIENCY,
        op_overhead=5e-6,
        worker_overhead=10e-6,
        batch_overhead=100e-6,
        command_overhead=5e-6,
        message_latency=50e-6,
        memory_capacity=capacity_gib * 2**30,
        synchronous=False,
    )


# SXM parts, dense (no sparsity) vendor figures.
H100 = _gpu("H100", tensor_tf32=494.7e12, half=989.4e12, fp8=1978.9e12, fp32=66.9e12,
            bw=3.35e12, capacity_gib=80)
"""NVIDIA H100 SXM (80 GB HBM3, 3.35 TB/s)."""

H200 = _gpu("H200", tensor_tf32=494.7e12, half=989.4e12, fp8=1978.9e12, fp32=66.9e12,
            bw=4.8e12, capacity_gib=141)
"""NVIDIA H200 SXM (141 GB HBM3e, 4.8 TB/s): H100 compute, more and faster memory."""


_cpu_cache: dict[int, DeviceProfile] = {}  # workers -> measured profile
_cpu_lock = threading.Lock()


def _measure_command_overhead(n: int = 200) -> tuple[float, float, float]:
    """Pickling a batch on the controller (fixed per batch, per command) and unpickling it on
    a worker (per command)."""
    import pickle

    from monarch._src.tensor.commands import CallOp, OpMeta, Ref, TensorMeta

    meta = OpMeta("aten::mm.default", (TensorMeta((64, 64), "torch.float32", "cpu"),) * 2,
                  (TensorMeta((64, 64), "torch.float32", "cpu"),))
    cmds = [CallOp(i, None, "main", "aten::mm.default", (Ref(i), Ref(i + 1)), {}, (i, i + 1),
                   (i + 2,), meta) for i in range(n)]
    one = _median(lambda: pickle.dumps((1, cmds[:1]), protocol=5), 20)
    many = _median(lambda: pickle.dumps((1, cmds), protocol=5), 5)
    per = max((many - one) / (n - 1), 0.0)
    blob = pickle.dumps((1, cmds), protocol=5)
    load = _median(lambda: pickle.loads(blob), 5) / n
    return one, per, load


def cpu_profile(refresh: bool = False, workers: int = 1) -> DeviceProfile:
    """This machine's CPU as seen by one of `workers` CPU workers, measured once per process
    and `workers` count, and cached (`refresh=True` measures again).

    With `workers == 1` the micro-benchmarks run in this process (well under a second). With
    more, that many child processes run them at the same time, so the rates include the
    workers' competition for cores, and also time gloo all-reduces among themselves for the
    collective model (a few seconds; see `calibrate.py`). Both add the real tensor-engine
    worker's overhead per command and the controller's cost of pickling commands.
    """
    from monarch._src.simulator.calibrate import (
        actor_round_trip,
        device_rates,
        measure_concurrently,
    )

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"cpu_profile(workers=...) must be a positive int, got {workers!r}.")
    with _cpu_lock:
        cached = _cpu_cache.get(workers)
        if cached is not None and not refresh:
            return cached
        if workers == 1:
            runs = [device_rates()]
        else:
            runs = measure_concurrently(workers)

        def mean(key: str) -> float:
            return statistics.fmean(r[key] for r in runs)

        def harmonic(key: str) -> float:  # average of times, as a rate
            return 1.0 / statistics.fmean(1.0 / r[key] for r in runs)

        mm32, mm64 = harmonic("mm32"), harmonic("mm64")
        extra: dict[str, Any] = {}
        message_latency = 100e-6  # loopback TCP through two event loops (one worker: a guess)
        if workers > 1:
            small_t = mean("allreduce_small")
            big_t = mean("allreduce_big")
            # Ring all-reduce over n: 2(n-1) steps, 2(n-1)/n of the bytes through each link.
            n = workers
            extra["collective_latency"] = small_t / (2 * (n - 1))
            moved = 2 * (n - 1) / n * runs[0]["allreduce_big_bytes"]
            spread = big_t - small_t  # the 1 MB all-reduce's extra time: its bandwidth term
            if spread > 1e-6:  # otherwise lost in the noise: the CommModel default
                extra["collective_bandwidth"] = moved / spread
            # A monarch message crosses a process boundary (as one gloo step does) and the
            # thread hand-offs an in-process actor call measures (half its round trip).
            message_latency = extra["collective_latency"] + actor_round_trip() / 2
        batch, per_cmd, per_load = _measure_command_overhead()
        worker = mean("worker_overhead") + per_load
        profile = DeviceProfile(
            name="cpu" if workers == 1 else f"cpu ({workers} workers)",
            kind="cpu",
            matmul_flops={"float32": mm32, "float64": mm64, "bfloat16": mm32 / 4,
                          "float16": mm32 / 4},
            default_matmul_flops=mm32,
            elementwise_flops=harmonic("elementwise"),
            memory_bandwidth=harmonic("bandwidth"),
            op_overhead=mean("op_overhead"),
            worker_overhead=worker,
            batch_overhead=batch + 50e-6,  # pickle + post to the runtime loop
            command_overhead=per_cmd,
            message_latency=message_latency,
            memory_capacity=_physical_memory(),
            synchronous=True,
            small_matmul=(runs[0]["mm_small_flops"], harmonic("mm_small")),
            large_matmul_flops=runs[0]["mm_large_flops"],
            cores=os.cpu_count() or 1,
            **extra,
        )
        _cpu_cache[workers] = profile
        return profile


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def get_profile(profile: str | DeviceProfile) -> DeviceProfile:
    """A profile by name ("H100", "H200", "cpu", case-insensitive) or the profile itself."""
    if isinstance(profile, DeviceProfile):
        return profile
    if not isinstance(profile, str):
        raise TypeError(
            f"profile must be a DeviceProfile or one of 'H100', 'H200', 'cpu'; got {profile!r}."
        )
    key = profile.lower()
    if key == "h100":
        return H100
    if key == "h200":
        return H200
    if key == "cpu":
        return cpu_profile()
    raise ValueError(
        f"Unknown device profile {profile!r}; use 'H100', 'H200', 'cpu', or build a "
        "DeviceProfile (e.g. H100.with_overrides(memory_bandwidth=...))."
    )
