"""Runs every benchmark program and writes each report to `benchmarks/results/`, with the load.

    python benchmarks/all.py [--only NAME,...] [--skip NAME,...] [--quick] [--out DIR]
                             [--timeout SECONDS] [--before DIR] [--list]

(`make bench` runs it.) Each benchmark runs in its own process group from `benchmarks/`, as
`run.py` runs its systems (this checkout first on `PYTHONPATH`, `.venv/bin/python` when it
exists), one after the other, and its JSON report is written to `<out>/<UTC date>-<name>.json`
wrapped with what makes it comparable later:

    {"benchmark": name, "command": [...], "commit": "<git HEAD>", "dirty": bool,
     "started_utc": "...", "wall_s": ..., "returncode": ..., "cpus": ...,
     "load_avg_1m_before": ..., "load_avg_1m_after": ..., "report": {the program's JSON}}

A benchmark that fails, hangs past `--timeout` or prints no JSON still gets its file, with
`report.error` and the tail of its stderr; the others still run, and the exit status is 1.
`--quick` passes each program its smoke-test options and writes to a temporary folder unless
`--out` is given, so smoke runs never land in `benchmarks/results/`. `--before DIR` (a git
worktree of an earlier commit) is measured in the same run by the programs that compare with an
earlier checkout (`BEFORE`: the workloads' "before" system, the notebook interrupt's and the kernel
restart's `--repo`).

The load keys are `_report`'s (`load_avg_1m_before`/`_after`, the 1-minute average); result files
written before it have `load_before`/`load_after`, each the 1, 5 and 15-minute averages.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import run
from _report import load_after, load_before, write_result

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


class Benchmark(NamedTuple):
    script: str  # in benchmarks/
    args: tuple[str, ...]  # a full run
    quick: tuple[str, ...]  # a smoke run
    what: str


# In the order they run; the names are the result files' suffixes.
BENCHMARKS: dict[str, Benchmark] = {
    "workloads": Benchmark("run.py", (), ("--quick",),
                           "W1-W5, ours / torchmonarch / asyncio floor"),
    "w6-rdma": Benchmark("rdma_bench.py", (), ("--quick", "--rounds", "1"),
                         "W6 RDMA buffers, ours / torchmonarch / process_vm_readv / socket"),
    "w7a": Benchmark("w7.py", ("--part", "a"),
                     ("--part", "a", "--procs", "4,8", "--calls", "10", "--idle-s", "1",
                      "--settle-s", "1"),
                     "W7 (a) one host, 16/64/96 procs, ours / torchmonarch"),
    "w7b": Benchmark("w7.py", ("--part", "b"),
                     ("--part", "b", "--agents", "64", "--hosts", "4,16", "--calls", "10"),
                     "W7 (b) 1,024 inproc agents, 16/64/256 simulated hosts"),
    "w7b-tcp": Benchmark("w7.py", ("--part", "b", "--agent-transport", "tcp"),
                         ("--part", "b", "--agent-transport", "tcp", "--agents", "64",
                          "--hosts", "4,16", "--calls", "10"),
                         "W7 (b) with the agents on loopback tcp (the controller's real path)"),
    "w8-tensor": Benchmark("tensor_bench.py", (), ("--quick",), "W8 tensor engine / raw gloo"),
    "simulator": Benchmark("simulator_validation.py", (),
                           ("--size", "tiny", "--steps", "2", "--warmup", "1", "--rounds", "1"),
                           "simulator: predicted vs measured, 3 models x 2 batches x 2 profiles"),
    "telemetry": Benchmark("telemetry_overhead.py", (), ("--calls", "10000", "--repeats", "3"),
                           "telemetry overhead per call"),
    "sql-telemetry-cost": Benchmark("sql_telemetry_cost.py", (),
                                    ("--calls", "300", "--repeats", "2"),
                                    "call_one p50/p99 with a job's SQL telemetry off and on"),
    "telemetry-probe": Benchmark("telemetry_probe.py", (), (),
                                 "the observability probe (SQL, dashboard, admin) on ours"),
    "remote-hosts": Benchmark("remote_hosts.py", (), ("--calls", "100"),
                              "remote loopback hosts / this_host()"),
    "notebook-interrupt": Benchmark("notebook_interrupt.py", (), ("--runs", "1"),
                                    "interrupting a notebook cell in a real kernel"),
    "kernel-restart": Benchmark("kernel_restart.py", (), ("--runs", "1"),
                                "restarting a real kernel: until the procs it spawned are gone"),
    "serialization": Benchmark("serialization_micro.py", (), ("--repeats", "3"),
                               "envelope serialization micro-benchmark"),
    "soak": Benchmark("soak.py", (), ("--calls", "2000"), "calls with procs SIGKILLed"),
    "chaos-soak": Benchmark("chaos_soak.py", (),
                            ("--calls", "1000", "--wave", "125", "--faults-per-kind", "1"),
                            "two netns hosts: procs, host agents and links failing (root)"),
    "rl-weight-sync": Benchmark("rl_weight_sync.py", (), ("--quick",),
                                "GRPO on a 3.3M-parameter transformer: RDMA / state_dict sync"),
}


# How each program that can compare with an earlier checkout of ours is told where it is.
BEFORE: dict[str, tuple[str, ...]] = {
    "workloads": ("--systems", "before,ours,torchmonarch,floor", "--before", "{}"),
    "notebook-interrupt": ("--repo", "{}"),
    "kernel-restart": ("--repo", "{}"),
}


def _log(msg: str) -> None:
    print(f"[all] {msg}", file=sys.stderr, flush=True)


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def run_one(name: str, bench: Benchmark, quick: bool, timeout: float,
            before: Path | None = None) -> dict[str, Any]:
    """Run one benchmark program (with `before`, an earlier checkout, where it compares with
    one); the wrapped record of its report (never raises)."""
    argv = [run._ours_python(), str(HERE / bench.script), *(bench.quick if quick else bench.args)]
    if before is not None and name in BEFORE:
        argv += [arg.format(before) for arg in BEFORE[name]]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO)
    started = datetime.datetime.now(datetime.timezone.utc)
    before_load = load_before()
    report = run.run_system(argv, env, timeout)
    after_load = load_after()
    return {
        "benchmark": name,
        "what": bench.what,
        "command": [Path(argv[0]).name, *argv[1:]],
        "quick": quick,
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "started_utc": started.isoformat(timespec="seconds"),
        "wall_s": report.pop("wall_s"),
        "returncode": report.pop("returncode"),
        "cpus": os.cpu_count(),
        **before_load,
        **after_load,
        "report": report,
    }


def _names(text: str | None, parser: argparse.ArgumentParser) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"Unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}.")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help="e.g. w7a,w7b (default: all)")
    parser.add_argument("--skip", default=None, help="e.g. soak,notebook-interrupt")
    parser.add_argument("--quick", action="store_true", help="each program's smoke-test options")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder of the result files (default: benchmarks/results, or a "
                             "temporary folder with --quick)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per benchmark")
    parser.add_argument("--before", type=Path, default=None,
                        help="an earlier checkout (git worktree) measured in the same run by "
                             f"{', '.join(BEFORE)}")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, bench in BENCHMARKS.items():
            print(f"{name:20} {bench.script:26} {bench.what}")
        return 0
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if args.before is not None and not (args.before / "monarch" / "__init__.py").is_file():
        parser.error(f"--before {args.before}: not a checkout of this project (no "
                     "monarch/__init__.py there); make one with `git worktree add DIR COMMIT`.")
    selected = _names(args.only, parser) or list(BENCHMARKS)
    skipped = set(_names(args.skip, parser))
    out = args.out or (Path(tempfile.mkdtemp(prefix="monarch-bench-")) if args.quick
                       else HERE / "results")
    out.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    for name in selected:
        if name in skipped:
            continue
        bench = BENCHMARKS[name]
        _log(f"{name}: {bench.script} ({bench.what}); load {os.getloadavg()[0]:.2f}")
        t0 = time.perf_counter()
        record = run_one(name, bench, args.quick, args.timeout, args.before)
        path = write_result(name, record, out,
                            datetime.datetime.fromisoformat(record["started_utc"]))
        error = record["report"].get("error")
        if error or record["returncode"] != 0:
            failed.append(name)
        status = f"FAILED: {error}" if error else "ok" if record["returncode"] == 0 else (
            "a measurement failed (see its report)")
        _log(f"{name}: {status} (exit {record['returncode']}, "
             f"{time.perf_counter() - t0:.0f} s) -> {path}")
    if failed:
        _log(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
