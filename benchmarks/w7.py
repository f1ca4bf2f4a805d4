"""W7: scale. Part (a), one host with many procs, runs under this package and under torchmonarch;
part (b), many simulated procs and hosts in one process, runs under this package only.

    python benchmarks/w7.py --part a [--procs 16,64,96] [--calls 60] [--idle-s 5]
                                     [--systems ours,torchmonarch] [--settle-s 10] [--retries 1]
                                     [--here]
    python benchmarks/w7.py --part b [--agents 1024] [--hosts 16,64,256] [--per-host 1,4]
                                     [--calls 60] [--agent-transport inproc|tcp]

prints ONE JSON object on stdout (progress on stderr) and exits 1 if a measurement failed. This
program prints numbers; it never asserts a time.

Part (a) uses only the public API (`monarch.actor`), like workloads.py, so the same file runs
under `benchmarks/.venv-torchmonarch/bin/python`. For each N: `spawn_procs(per_host={"procs":
N})` on `this_host()`, one actor per proc, the first `call()` answered (`spawn_s`); `call()`
latency over the N ranks after a warm-up (`call_p50_ms`, `call_p99_ms`); the CPU the procs burn
while idle (`idle_cpu_pct`, from /proc/<pid>/stat, summed over the procs); their unique memory
(`uss_mib`, Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup). Each figure is given for
the actors' procs (pids from an endpoint returning `os.getpid()`) and, under `all_`, for every
process descended from this one (zygotes, host agents, procs), which is what the host pays.
With `--here` it measures the system of the interpreter running it; without, it runs itself with
`--here` once per N and system, in a fresh interpreter each time, the systems alternating at each
N (interpreters and environments as `run.py` picks them), a failed run tried again `--retries`
times (its errors kept under `failed_attempts`), and adds the load around each run (`_report`'s
`load_avg_1m_before`/`_after`; reports before it had `load_before`/`load_after`, the 1, 5 and
15-minute averages), the ratios
ours/torchmonarch per N and the issue's targets at the largest N.

Part (b) is in `w7_sim.py` (internal API of this package).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as wl  # (same folder: its helpers and its system detection)
from _report import load_after, load_before

from monarch.actor import Actor, endpoint, this_host

GET_TIMEOUT_S = 300.0  # 96 torchmonarch procs take about 30 s to come up here
PAGE_MIB = 1.0 / 1024.0  # smaps figures are in kB


class Probe(Actor):
    """One per proc: a no-op to time, and the pid of the proc it lives in."""

    @endpoint
    def noop(self, i: int) -> int:
        return i

    @endpoint
    def pid(self) -> int:
        return os.getpid()


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of `pid` in clock ticks; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5), after "comm)"


def _uss_mib(pid: int) -> float | None:
    """Private_Clean + Private_Dirty of `pid` in MiB; None if it is gone or unreadable."""
    total_kb = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total_kb += int(line.split()[1])
    except OSError:
        return None
    return total_kb * PAGE_MIB


def _descendants(root: int) -> list[int]:
    """Every live process below `root` in the process tree (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _idle_cpu_pct(groups: list[list[int]], seconds: float) -> list[float]:
    """CPU used by each group of pids over the same `seconds` of idleness, in % of one core."""
    tick = os.sysconf("SC_CLK_TCK")
    every = {pid for group in groups for pid in group}
    before = {pid: _cpu_ticks(pid) for pid in every}
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    used: dict[int, int] = {}
    for pid, start in before.items():
        end = _cpu_ticks(pid)
        if start is not None and end is not None:
            used[pid] = end - start
    return [round(100.0 * sum(used.get(pid, 0) for pid in group) / tick / elapsed, 2)
            for group in groups]


def _memory(pids: list[int]) -> dict[str, Any]:
    sizes = [s for s in (_uss_mib(pid) for pid in pids) if s is not None]
    if not sizes:
        return {"uss_mib": None}
    return {
        "uss_mib": round(statistics.median(sizes), 2),
        "uss_mean_mib": round(statistics.fmean(sizes), 2),
        "uss_total_mib": round(sum(sizes), 1),
        "measured": len(sizes),
    }


def run_one(n: int, calls: int, idle_s: float) -> dict[str, Any]:
    """Spawn N procs with one Probe each, then time, idle and weigh them; stop them."""
    t0 = time.perf_counter()
    procs = this_host().spawn_procs(per_host={"procs": n})
    try:
        probes = procs.spawn("w7", Probe)
        pids = sorted(probes.pid.call().get(timeout=GET_TIMEOUT_S).values())
        spawn_s = time.perf_counter() - t0
        wl._check(len(set(pids)) == n, f"{n} procs answered from {len(set(pids))} pids")
        wl._log(f"W7a N={n}: spawn + first call {spawn_s:.2f} s")

        noop = probes.noop
        for i in range(max(3, calls // 10)):
            noop.call(i).get(timeout=GET_TIMEOUT_S)
        latency = wl._latency_summary(wl.timed_calls(noop, calls, n, timeout=GET_TIMEOUT_S))

        everything = _descendants(os.getpid())
        idle_procs, idle_all = _idle_cpu_pct([pids, everything], idle_s)
        result: dict[str, Any] = {
            "procs": n,
            "spawn_s": round(spawn_s, 3),
            "call_p50_ms": round(latency["p50_us"] / 1000.0, 2),
            "call_p99_ms": round(latency["p99_us"] / 1000.0, 2),
            "calls": latency["n"],
            "idle_cpu_pct": idle_procs,
            "all_idle_cpu_pct": idle_all,
            "idle_s": idle_s,
            **_memory(pids),
            "all_processes": len(everything),
            "all_uss_total_mib": _memory(everything).get("uss_total_mib"),
        }
    finally:
        t1 = time.perf_counter()
        procs.stop().get(timeout=GET_TIMEOUT_S)
    result["stop_s"] = round(time.perf_counter() - t1, 3)
    wl._log(f"W7a N={n}: {result}")
    return result


# Issue 17's targets at 96 procs: (figure, bound of ours/torchmonarch, or an absolute bound).
TARGETS_A: tuple[tuple[str, str, float], ...] = (
    ("spawn_s", "ratio <=", 0.1),
    ("call_p50_ms", "ratio <=", 0.25),
    ("uss_mib", "ours <=", 16.0),
)
# torchmonarch gives up on a spawn after 30 s without progress ("failed to configure process:
# Timeout"), which 96 of its procs exceed on this 2-core machine under load. Longer limits let
# it finish; they do not make it faster. The report records them.
PEER_TIMEOUTS = {"HYPERACTOR_MESH_PROC_SPAWN_MAX_IDLE": "2m",
                 "HYPERACTOR_HOST_SPAWN_READY_TIMEOUT": "2m"}
A_FIGURES = ("spawn_s", "call_p50_ms", "call_p99_ms", "idle_cpu_pct", "all_idle_cpu_pct",
             "uss_mib", "all_uss_total_mib", "stop_s")


def side_by_side(args: argparse.Namespace) -> dict[str, Any]:
    """Part (a) under each system: one fresh interpreter per (N, system), the systems
    alternating at each N, with the load before and after each; then ratios and targets."""
    import run

    report: dict[str, Any] = {"part": "a", "cpus": os.cpu_count(),
                              "python": platform.python_version()}
    commands = run._commands(argparse.Namespace(only=[], quick=False, before=None))
    for system in args.systems:
        command = commands[system]
        report[system] = {"error": command} if isinstance(command, str) else {}
    if "torchmonarch" in args.systems:
        report["torchmonarch"]["env"] = PEER_TIMEOUTS
    for n in args.procs:
        for system in args.systems:
            command = commands[system]
            if isinstance(command, str):
                continue
            exe, env = command[0][0], command[1]
            if system == "torchmonarch":
                env = dict(env, **PEER_TIMEOUTS)
            argv = [exe, str(Path(__file__).resolve()), "--part", "a", "--here", "--procs", str(n),
                    "--calls", str(args.calls), "--idle-s", str(args.idle_s)]
            failures: list[str] = []
            for _attempt in range(1 + args.retries):
                time.sleep(args.settle_s)  # let the previous run's procs finish exiting
                before = load_before()
                child = run.run_system(argv, env, args.timeout)
                entry = child.get(f"N{n}", {"error": child.get("error", "no figures")})
                if "error" in child and "stderr_tail" in child:
                    entry["stderr_tail"] = child["stderr_tail"]
                entry.update(before, **load_after(), wall_s=child["wall_s"])
                if "error" not in entry:
                    break
                failures.append(str(entry["error"])[:1000])
                wl._log(f"W7a {system} N={n} failed: {failures[-1][:300]}")
            if failures and "error" not in entry:
                entry["failed_attempts"] = failures  # what the retries got past
            elif failures:
                entry["attempts"] = len(failures)
            for key in ("system", "version"):
                if key in child:
                    report[system][key] = child[key]
            report[system][f"N{n}"] = entry
            wl._log(f"W7a {system} N={n}: {entry}")
    ours, peer = report.get("ours", {}), report.get("torchmonarch", {})
    ratios: dict[str, Any] = {}
    for n in args.procs:
        a, b = ours.get(f"N{n}", {}), peer.get(f"N{n}", {})
        ratios[f"N{n}"] = {
            key: round(a[key] / b[key], 3) for key in A_FIGURES
            if isinstance(a.get(key), (int, float)) and isinstance(b.get(key), (int, float))
            and b[key] > 0
        }
    report["ratios ours/torchmonarch"] = ratios
    top = f"N{max(args.procs)}"
    targets: dict[str, Any] = {}
    for key, kind, bound in TARGETS_A:
        value = (ratios.get(top, {}).get(key) if kind.startswith("ratio")
                 else ours.get(top, {}).get(key))
        targets[f"{top} {key} {kind} {bound}"] = {
            "value": value, "met": None if value is None else value <= bound}
    report["targets"] = targets
    return report


def part_a(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"part": "a", "system": wl.SYSTEM, "version": wl.VERSION,
                              "python": platform.python_version(), "cpus": os.cpu_count()}
    for n in args.procs:
        report[f"N{n}"] = wl._guarded(f"W7a N={n}",
                                      functools.partial(run_one, n, args.calls, args.idle_s))
    return report


def _ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("a", "b"), required=True)
    parser.add_argument("--procs", type=_ints, default=[16, 64, 96], help="(a) procs per run")
    parser.add_argument("--calls", type=int, default=60, help="timed call()s per mesh")
    parser.add_argument("--idle-s", type=float, default=5.0, help="(a) idle window in seconds")
    parser.add_argument("--systems", default="ours,torchmonarch",
                        help="(a) systems run side by side, in this order")
    parser.add_argument("--here", action="store_true",
                        help="(a) measure only the system of this interpreter")
    parser.add_argument("--timeout", type=float, default=900.0, help="(a) seconds per run")
    parser.add_argument("--retries", type=int, default=1,
                        help="(a) runs again a (N, system) run that failed, this many times")
    parser.add_argument("--settle-s", type=float, default=10.0,
                        help="(a) pause before each run, for the previous procs to exit")
    parser.add_argument("--agents", type=int, default=1024, help="(b) one-dimensional mesh size")
    parser.add_argument("--hosts", type=_ints, default=[16, 64, 256], help="(b) simulated hosts")
    parser.add_argument("--per-host", type=_ints, default=[1, 4], help="(b) ranks per host")
    parser.add_argument("--agent-transport", choices=("inproc", "tcp"), default="inproc",
                        help="(b) what the simulated procs listen on")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if args.retries < 0:
        parser.error("--retries must be 0 or more")
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in args.systems if s not in ("ours", "torchmonarch")]
    if unknown:
        parser.error(f"Unknown system(s) {unknown}; choose from ['ours', 'torchmonarch'].")
    wl._avoid_cwd_shadowing()
    if args.part == "a" and args.here:
        report = part_a(args)
    elif args.part == "a":
        report = side_by_side(args)
        print(json.dumps(report), flush=True)
        results = [report[system] for system in args.systems]
        return 1 if any("error" in r for r in results) or any(
            isinstance(v, dict) and "error" in v for r in results for v in r.values()) else 0
    else:
        if wl.SYSTEM != "monarch-dask":
            parser.error("part b uses this package's internal API; run it with this repository's "
                         "venv, not torchmonarch's")
        import w7_sim

        before = load_before()
        report = w7_sim.part_b(args.agents, args.hosts, args.per_host, args.calls,
                               args.agent_transport)
        report.update(before, **load_after())
    print(json.dumps(report), flush=True)
    failed = any(isinstance(v, dict) and "error" in v for v in report.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
