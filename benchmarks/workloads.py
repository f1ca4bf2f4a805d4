"""Workloads W1-W5 of shared/PERFORMANCE.md, written against the public Monarch API only.

The same file runs unchanged under this package (monarch-dask) and, from another virtual
environment, under Meta's torchmonarch; `benchmarks/run.py` runs it under both and compares.

    python benchmarks/workloads.py [--only W1,W2,...] [--quick] [--repeats N]

prints ONE JSON object on stdout (runtime chatter and progress go to stderr):

    {"system": "monarch-dask" | "torchmonarch", "version": ..., "python": ..., "quick": ...,
     "W1": {"seconds": ...}, "W2": {"p50_us": ..., "p99_us": ...}, "W3": {"calls_per_s": ...},
     "W4": {"p50_us": ..., "p99_us": ...}, "W5": {"numpy_GBps": ..., "torch_GBps": ...}}

A workload that fails is reported as {"error": "..."} in its slot and the exit status is 1; the
other workloads still run. This program prints numbers; it never asserts a time.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import percentile

ALL_WORKLOADS = ("W1", "W2", "W3", "W4", "W5")

# Counts per workload: (full run, --quick run). --quick is a smoke test, about 10x smaller.
COUNTS: dict[str, tuple[int, int]] = {
    "w1_samples": (5, 2),  # fresh interpreters, median reported
    "w2_warmup": (200, 20),
    "w2_calls": (2_000, 200),
    "w3_calls": (10_000, 1_000),
    "w3_repeats": (3, 1),  # median of the repeats
    "w4_warmup": (50, 5),
    "w4_calls": (500, 50),
    "w5_repeats": (5, 2),  # after one warm-up transfer per kind; median reported
}
W5_BYTES = 64 << 20
# No single reply should take this long; a hang becomes an error entry instead of a stuck run.
GET_TIMEOUT_S = 120.0
W1_CHILD_TIMEOUT_S = 120.0


def _log(msg: str) -> None:
    print(f"[workloads] {msg}", file=sys.stderr, flush=True)


def _detect_system() -> tuple[str, str | None]:
    # Ours re-exports a few `monarch._rust_bindings` paths in pure Python; torchmonarch's
    # `_rust_bindings` is a compiled extension module (a file, not a package directory).
    spec = importlib.util.find_spec("monarch._rust_bindings")
    if spec is not None and spec.submodule_search_locations is None:
        dist = "torchmonarch"
        name = "torchmonarch"
    else:
        dist = "monarch-dask"
        name = "monarch-dask"
    try:
        version: str | None = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return name, version


SYSTEM, VERSION = _detect_system()

try:
    from monarch.actor import Actor, endpoint, this_host
# Any failure is reported as JSON, so the runner can show why this system failed.
except Exception as exc:  # noqa: BLE001
    print(
        json.dumps(
            {
                "system": SYSTEM,
                "version": VERSION,
                "python": platform.python_version(),
                "error": f"import monarch.actor failed: {type(exc).__name__}: {exc}",
            }
        ),
        flush=True,
    )
    sys.exit(1)


class Bench(Actor):
    """The remote side of every workload: endpoints that do (almost) nothing."""

    @endpoint
    def noop(self, i: int) -> int:
        return i

    @endpoint
    def length(self, x: Any) -> int:
        return len(x)


def _avoid_cwd_shadowing() -> None:
    """Leaves a working directory whose `monarch/` folder would shadow the installed package.

    Monarch starts its procs with `python -m ...`, which puts the working directory first on
    `sys.path`; run from this repository's root, torchmonarch's procs would import our `monarch/`
    and die at start. The workloads themselves do not depend on the working directory.
    """
    import monarch

    installed = Path(monarch.__file__).resolve().parent
    local = Path.cwd() / "monarch"
    if local.is_dir() and local.resolve() != installed:
        os.chdir(Path(__file__).resolve().parent)


def _latency_summary(samples_ns: list[int]) -> dict[str, Any]:
    us = sorted(s / 1_000.0 for s in samples_ns)
    return {
        "p50_us": round(percentile(us, 0.5), 1),
        "p99_us": round(percentile(us, 0.99), 1),
        "mean_us": round(statistics.fmean(us), 1),
        "n": len(us),
    }


def _check(condition: bool, what: str) -> None:
    # A wrong reply means the figure measures something else; fail the workload, not the run.
    if not condition:
        raise RuntimeError(f"Workload sanity check failed: {what}.")


# --------------------------------------------------------------------------------------------
# W1: cold spawn, each sample in a fresh interpreter.


def _w1_child() -> None:
    """One cold-spawn sample; runs as `workloads.py --w1-child` in a fresh interpreter."""
    t0 = time.perf_counter()
    host = this_host()  # the first use bootstraps the client context: part of a cold start
    t1 = time.perf_counter()
    procs = host.spawn_procs(per_host={"procs": 2})
    actors = procs.spawn("w1", Bench)
    values = actors.noop.call(7).get(timeout=GET_TIMEOUT_S)
    t2 = time.perf_counter()
    _check(sorted(values.values()) == [7, 7], f"W1 replies were {list(values.values())}")
    procs.stop().get(timeout=GET_TIMEOUT_S)
    t3 = time.perf_counter()
    print(json.dumps({"seconds": t2 - t0, "this_host_s": t1 - t0, "stop_s": t3 - t2}), flush=True)


def _last_json_line(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if isinstance(parsed, dict):
                return parsed
    return None


_IMPORT_PROBE = (
    "import time; t = time.perf_counter(); import monarch.actor; "
    "print(time.perf_counter() - t)"
)


def _import_seconds() -> float:
    """`import monarch.actor` alone, timed in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True,
                          timeout=W1_CHILD_TIMEOUT_S, check=True)
    return float(proc.stdout.strip().splitlines()[-1])


def run_w1(samples: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    imports = [_import_seconds() for _ in range(samples)]
    for i in range(samples):
        try:
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--w1-child"],
                capture_output=True,
                text=True,
                timeout=W1_CHILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"W1 sample {i} did not finish within {W1_CHILD_TIMEOUT_S:.0f} s."
            ) from exc
        parsed = _last_json_line(proc.stdout)
        if proc.returncode != 0 or parsed is None:
            tail = (proc.stderr or "")[-1500:]
            raise RuntimeError(
                f"W1 sample {i} exited with status {proc.returncode}. Its stderr ends with: {tail}"
            )
        runs.append(parsed)
        _log(f"W1 sample {i}: {parsed['seconds']:.3f} s")
    return {
        "seconds": round(statistics.median(r["seconds"] for r in runs), 4),
        "this_host_s": round(statistics.median(r["this_host_s"] for r in runs), 4),
        "stop_s": round(statistics.median(r["stop_s"] for r in runs), 4),
        "import_s": round(statistics.median(imports), 4),
        "samples": [round(r["seconds"], 4) for r in runs],
    }


# --------------------------------------------------------------------------------------------
# W2-W5: one client, warm meshes.


def run_w2(one: Any, warmup: int, calls: int) -> dict[str, Any]:
    noop = one.noop
    for i in range(warmup):
        noop.call_one(i).get(timeout=GET_TIMEOUT_S)
    samples: list[int] = []
    clock = time.perf_counter_ns
    for i in range(calls):
        t0 = clock()
        value = noop.call_one(i).get(timeout=GET_TIMEOUT_S)
        samples.append(clock() - t0)
        if value != i:
            _check(False, f"W2 call {i} answered {value!r}")
    return _latency_summary(samples)


def run_w3(one: Any, calls: int, repeats: int) -> dict[str, Any]:
    noop = one.noop
    rates: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        futures = [noop.call_one(i) for i in range(calls)]
        t_issued = time.perf_counter()
        total = 0
        for fut in futures:
            total += fut.get(timeout=GET_TIMEOUT_S)
        elapsed = time.perf_counter() - t0
        _check(total == calls * (calls - 1) // 2, "W3 replies do not add up")
        rates.append(calls / elapsed)
        _log(f"W3: {calls / elapsed:,.0f} calls/s (issuing took {t_issued - t0:.3f} s)")
    return {
        "calls_per_s": round(statistics.median(rates), 1),
        "n": calls,
        "samples": [round(r, 1) for r in rates],
    }


def timed_calls(endpoint: Any, calls: int, n: int, what: str = "call",
                timeout: float = GET_TIMEOUT_S) -> list[int]:
    """Nanoseconds of each of `calls` sequential `endpoint.call(i).get(timeout)`, each checked
    to gather `n` values (W4, and W7's `call()` latencies)."""
    samples: list[int] = []
    clock = time.perf_counter_ns
    for i in range(calls):
        t0 = clock()
        values = endpoint.call(i).get(timeout=timeout)
        samples.append(clock() - t0)
        if len(values) != n:
            _check(False, f"{what} {i} gathered {len(values)} values, not {n}")
    return samples


def run_w4(four: Any, warmup: int, calls: int) -> dict[str, Any]:
    noop = four.noop
    for i in range(warmup):
        noop.call(i).get(timeout=GET_TIMEOUT_S)
    return _latency_summary(timed_calls(noop, calls, 4, "W4 call"))


def _transfer_rate(one: Any, payload: Any, repeats: int) -> list[float]:
    length = one.length
    expected = len(payload)
    _check(length.call_one(payload).get(timeout=GET_TIMEOUT_S) == expected, "W5 warm-up length")
    rates: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        got = length.call_one(payload).get(timeout=GET_TIMEOUT_S)
        elapsed = time.perf_counter() - t0
        _check(got == expected, f"W5 actor saw {got} elements, not {expected}")
        rates.append(W5_BYTES / elapsed / 1e9)
    return rates


def run_w5(one: Any, repeats: int) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {"bytes": W5_BYTES}
    array = np.ones(W5_BYTES, dtype=np.uint8)  # uint8, so len() is the size in bytes
    rates = _transfer_rate(one, array, repeats)
    out["numpy_GBps"] = round(statistics.median(rates), 3)
    out["numpy_samples"] = [round(r, 3) for r in rates]
    del array
    try:
        import torch
    except ImportError as exc:
        out["torch_GBps"] = None
        out["torch_error"] = f"torch is not importable here: {exc}"
        return out
    tensor = torch.ones(W5_BYTES, dtype=torch.uint8)
    rates = _transfer_rate(one, tensor, repeats)
    out["torch_GBps"] = round(statistics.median(rates), 3)
    out["torch_samples"] = [round(r, 3) for r in rates]
    return out


def _guarded(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    _log(f"{name} ...")
    t0 = time.perf_counter()
    try:
        result = fn()
    # One failing workload must not hide the others' figures.
    except Exception as exc:  # noqa: BLE001
        _log(f"{name} failed: {type(exc).__name__}: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"[:4000]}
    _log(f"{name} done in {time.perf_counter() - t0:.1f} s: {result}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(ALL_WORKLOADS), help="e.g. W1,W3")
    parser.add_argument("--quick", action="store_true", help="about 10x smaller counts")
    parser.add_argument("--repeats", type=int, default=None, help="override W1/W3/W5 repeats")
    parser.add_argument("--w1-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    _avoid_cwd_shadowing()
    if args.w1_child:
        _w1_child()
        return 0

    selected = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in selected if w not in ALL_WORKLOADS]
    if unknown:
        parser.error(f"Unknown workload(s) {unknown}; choose from {list(ALL_WORKLOADS)}.")
    counts = {k: (quick if args.quick else full) for k, (full, quick) in COUNTS.items()}
    if args.repeats is not None:
        for key in ("w1_samples", "w3_repeats", "w5_repeats"):
            counts[key] = args.repeats

    report: dict[str, Any] = {
        "system": SYSTEM,
        "version": VERSION,
        "python": platform.python_version(),
        "quick": args.quick,
        "counts": counts,
    }

    # W1 first: its samples run in fresh interpreters while this one holds no procs yet.
    if "W1" in selected:
        report["W1"] = _guarded("W1", lambda: run_w1(counts["w1_samples"]))

    meshes: list[Any] = []
    try:
        if {"W2", "W3", "W5"} & set(selected):
            one_procs = this_host().spawn_procs(per_host={"procs": 1})
            meshes.append(one_procs)
            one = one_procs.spawn("bench", Bench)
            one.noop.call_one(0).get(timeout=GET_TIMEOUT_S)
            if "W2" in selected:
                report["W2"] = _guarded(
                    "W2", lambda: run_w2(one, counts["w2_warmup"], counts["w2_calls"])
                )
            if "W3" in selected:
                report["W3"] = _guarded(
                    "W3", lambda: run_w3(one, counts["w3_calls"], counts["w3_repeats"])
                )
            if "W5" in selected:
                report["W5"] = _guarded("W5", lambda: run_w5(one, counts["w5_repeats"]))
        if "W4" in selected:
            four_procs = this_host().spawn_procs(per_host={"procs": 4})
            meshes.append(four_procs)
            four = four_procs.spawn("bench4", Bench)
            four.noop.call(0).get(timeout=GET_TIMEOUT_S)
            report["W4"] = _guarded(
                "W4", lambda: run_w4(four, counts["w4_warmup"], counts["w4_calls"])
            )
    # Setting up the meshes failed: every workload still pending fails with that reason.
    except Exception as exc:  # noqa: BLE001
        for name in selected:
            report.setdefault(name, {"error": f"mesh setup failed: {type(exc).__name__}: {exc}"})
    finally:
        for mesh in meshes:
            try:
                mesh.stop().get(timeout=GET_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 -- reported; the other meshes still stop
                _log(f"stopping a proc mesh failed: {type(exc).__name__}: {exc}")
                report.setdefault("stop_error", f"{type(exc).__name__}: {exc}")

    print(json.dumps(report), flush=True)
    failed = any(isinstance(report.get(w), dict) and "error" in report[w] for w in selected)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
