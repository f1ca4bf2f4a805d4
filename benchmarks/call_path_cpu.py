"""Where the CPU of a call goes: each thread's CPU time per call, caller and callee, for W2's
pattern (one `call_one().get()` at a time) and W3's (10,000 issued, then gathered), with the
garbage collector's share of W3.

    python benchmarks/call_path_cpu.py [--calls N] [--rounds R] [--json FILE]

Reads each thread's time on CPU from `/proc/<pid>/task/<tid>/schedstat` (nanoseconds, Linux)
before and after; threads are named by role: the caller's main thread and runtime loop, the
callee's runtime loop (its main thread) and actor thread. Prints one JSON object.

What it showed for issue 30 (2-vCPU microVM): W2 is a chain of four threads handing the call
on, and their CPU per call adds up to nearly the whole round trip, so every microsecond taken
off any of them comes off the latency; a thread woken on the other vCPU runs its first
microseconds slowly (a warm `call_one` costs 5 us, the same code after a wake-up 20-50 us).
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

from _report import load_after, load_before

from monarch.actor import Actor, endpoint, this_host


class Callee(Actor):
    @endpoint
    def noop(self, i: int) -> int:
        return i

    @endpoint
    def whoami(self) -> tuple[int, int]:
        """(pid, the actor thread's native id)."""
        return os.getpid(), threading.get_native_id()


def _cpu_ns(pid: int) -> dict[int, int]:
    """Time on CPU of each thread of process `pid`, by thread id."""
    out = {}
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                out[int(path.split("/")[4])] = int(f.read().split()[0])
        except OSError:
            continue  # a thread that ended meanwhile
    return out


def _per_call(before: dict[int, int], after: dict[int, int], roles: dict[int, str],
              calls: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for tid, ns in after.items():
        spent = ns - before.get(tid, 0)
        if spent > 0:
            role = roles.get(tid, "other threads")
            out[role] = round(out.get(role, 0.0) + spent / 1000 / calls, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=10_000, help="calls per W3 round")
    parser.add_argument("--rounds", type=int, default=3, help="W3 rounds (and W2 calls / 3)")
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    if not os.path.exists(f"/proc/{os.getpid()}/task"):
        sys.exit("call_path_cpu needs Linux's /proc/<pid>/task/<tid>/schedstat")

    report: dict[str, Any] = {"benchmark": "call_path_cpu", **load_before()}
    mesh = this_host().spawn_procs(per_host={"procs": 1})
    try:
        callee = mesh.spawn("cpu", Callee)
        noop = callee.noop
        pid, actor_tid = callee.whoami.call_one().get(timeout=60)
        me = os.getpid()
        roles = {threading.main_thread().native_id or 0: "caller main thread"}
        roles.update({tid: "caller runtime loop" for tid in _cpu_ns(me) if tid not in roles})
        roles[pid] = "callee runtime loop"
        roles[actor_tid] = "callee actor thread"
        for i in range(2_000):
            noop.call_one(i).get(timeout=60)

        def both() -> dict[int, int]:
            return {**_cpu_ns(me), **_cpu_ns(pid)}

        # W2's pattern
        n = max(1, args.calls * args.rounds // 3)
        start, t0 = both(), time.perf_counter()
        for i in range(n):
            noop.call_one(i).get(timeout=60)
        wall = time.perf_counter() - t0
        report["W2"] = {"calls": n, "wall_us_per_call": round(wall / n * 1e6, 1),
                        "cpu_us_per_call": _per_call(start, both(), roles, n)}

        # W3's pattern, with the collector's time
        collected = {"collections": 0, "seconds": 0.0}
        began: list[float] = []

        def on_gc(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                began.append(time.perf_counter())
            elif began:
                collected["collections"] += 1
                collected["seconds"] += time.perf_counter() - began.pop()

        gc.callbacks.append(on_gc)
        try:
            rates = []
            start, t0 = both(), time.perf_counter()
            for _ in range(args.rounds):
                r0 = time.perf_counter()
                futures = [noop.call_one(i) for i in range(args.calls)]
                total = sum(f.get(timeout=60) for f in futures)
                rates.append(args.calls / (time.perf_counter() - r0))
                assert total == args.calls * (args.calls - 1) // 2
            wall = time.perf_counter() - t0
        finally:
            gc.callbacks.remove(on_gc)
        calls = args.calls * args.rounds
        report["W3"] = {"calls": calls, "calls_per_s": round(statistics.median(rates), 1),
                        "cpu_us_per_call": _per_call(start, both(), roles, calls),
                        "gc_collections": collected["collections"],
                        "gc_share_of_wall": round(collected["seconds"] / wall, 3)}
    finally:
        mesh.stop().get(timeout=60)
    report.update(load_after())
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
