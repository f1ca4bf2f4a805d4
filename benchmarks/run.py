"""Runs the workloads under each system and prints one JSON report with ratios and targets.

    python benchmarks/run.py [--quick] [--only W1,W2] [--systems ours,torchmonarch,floor]
                             [--before CHECKOUT] [--timeout SECONDS] [--output FILE]

Systems:
  ours          benchmarks/workloads.py under this repository's venv (.venv/bin/python if it
                exists, else the interpreter running this script)
  torchmonarch  benchmarks/workloads.py under benchmarks/.venv-torchmonarch (made by
                benchmarks/setup_peer.sh); reported as an error entry when that venv is missing
  floor         benchmarks/asyncio_floor.py (plain asyncio + pickle 5, and a raw socket)
  before        benchmarks/workloads.py under this venv but with another checkout of this
                repository first on PYTHONPATH (`--before DIR`, e.g. a `git worktree add DIR
                <commit>`): an earlier version of ours, measured in the same run ("ours/before")

Each system runs in its own process group with a timeout; a system that fails, hangs or prints
no JSON becomes {"error": ...} in the report and the other systems still run. The targets are
those of shared/PERFORMANCE.md, checked as ratios measured side by side in this one run. This
program prints numbers; it never fails because a target is missed. The load is `_report`'s
1-minute average: `load_avg_1m_before` at the start, and per system `load_avg_1m_after` (reports
before it had `load_average_at_start` and `load_average_after`, the 1, 5 and 15-minute averages).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import load_after, load_before

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ALL_SYSTEMS = ("ours", "torchmonarch", "floor", "before")
ALL_WORKLOADS = ("W1", "W2", "W3", "W4", "W5")

# (workload, key, higher is better) for every figure that gets a ratio.
FIGURES: tuple[tuple[str, str, bool], ...] = (
    ("W1", "seconds", False),
    ("W2", "p50_us", False),
    ("W2", "p99_us", False),
    ("W3", "calls_per_s", True),
    ("W4", "p50_us", False),
    ("W4", "p99_us", False),
    ("W5", "numpy_GBps", True),
    ("W5", "torch_GBps", True),
)

# shared/PERFORMANCE.md targets: (name, workload, key, baseline system, baseline key, op, bound).
TARGETS: tuple[tuple[str, str, str, str, str, str, float], ...] = (
    ("W1", "W1", "seconds", "torchmonarch", "seconds", "<=", 0.8),
    ("W2 p50", "W2", "p50_us", "torchmonarch", "p50_us", "<=", 0.4),
    ("W2 p99", "W2", "p99_us", "torchmonarch", "p99_us", "<=", 0.5),
    ("W3", "W3", "calls_per_s", "torchmonarch", "calls_per_s", ">=", 10.0),
    ("W4", "W4", "p50_us", "torchmonarch", "p50_us", "<=", 0.4),
    ("W5 numpy", "W5", "numpy_GBps", "torchmonarch", "numpy_GBps", ">=", 4.0),
    ("W5 torch", "W5", "torch_GBps", "torchmonarch", "torch_GBps", ">=", 4.0),
    ("W5 numpy vs raw socket", "W5", "numpy_GBps", "floor", "raw_socket_GBps", ">=", 0.6),
    ("W5 torch vs raw socket", "W5", "torch_GBps", "floor", "raw_socket_GBps", ">=", 0.6),
)


def _log(msg: str) -> None:
    print(f"[run] {msg}", file=sys.stderr, flush=True)


def _ours_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _commands(args: argparse.Namespace) -> dict[str, tuple[list[str], dict[str, str]] | str]:
    """Per system: (argv, environment), or a string saying why it cannot run."""
    flags = ["--only", ",".join(args.only)] + (["--quick"] if args.quick else [])
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Ours may run uninstalled; PYTHONPATH points its procs at this checkout too.
    ours_env = dict(base_env, PYTHONPATH=str(REPO))
    peer = HERE / ".venv-torchmonarch" / "bin" / "python"
    commands: dict[str, tuple[list[str], dict[str, str]] | str] = {
        "ours": ([_ours_python(), str(HERE / "workloads.py"), *flags], ours_env),
        "floor": ([_ours_python(), str(HERE / "asyncio_floor.py"), *flags], base_env),
    }
    if args.before is None:
        commands["before"] = "no --before checkout was given."
    elif not (args.before / "monarch" / "__init__.py").exists():
        commands["before"] = f"{args.before} is not a checkout of this repository."
    else:
        before_env = dict(base_env, PYTHONPATH=str(args.before.resolve()))
        commands["before"] = (
            [_ours_python(), str(args.before / "benchmarks" / "workloads.py"), *flags],
            before_env,
        )
    if peer.exists():
        # No PYTHONPATH: torchmonarch's procs must import its `monarch`, never this checkout's.
        commands["torchmonarch"] = ([str(peer), str(HERE / "workloads.py"), *flags], base_env)
    else:
        commands["torchmonarch"] = (
            f"{peer} does not exist; run `bash benchmarks/setup_peer.sh` to create it."
        )
    return commands


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The report a program printed: its whole stdout as one (indented) JSON object, else the
    last line that is one."""
    if text.lstrip().startswith("{"):
        try:
            whole = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(whole, dict):
                return whole
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


# How long the members of a finished benchmark's process group get to end on their own: a
# zygote or worker that watches its parent exits within milliseconds of it.
GROUP_EXIT_GRACE_S = 2.0


def _group_members(pgid: int) -> list[str]:
    """The processes of group `pgid` still running, as "pid: cmdline" ([] when none).

    Zombies are not counted: a member whose parent (the benchmark) exited first is reparented to
    init and stays a zombie until init reaps it, which a container's init may do only every
    second or two; it runs nothing and holds nothing but its pid. Counting them (as `killpg(pgid,
    0)` does: it succeeds on a zombie) reported every benchmark that imported monarch as leaving
    processes behind: its prestarted zygote, gone at once, was still waiting to be reaped.
    """
    alive = []
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc (not Linux): any member, zombie or not
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [f"?: a process of group {pgid}"]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue  # ended while listed
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[2]) != pgid or fields[0] in (b"Z", b"X"):
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            cmd = b"?"
        alive.append(f"{entry}: {cmd.decode(errors='replace').strip()[:200]}")
    return alive


def _leftovers(pgid: int) -> list[str]:
    """The members of group `pgid` still running after up to `GROUP_EXIT_GRACE_S` seconds."""
    deadline = time.monotonic() + GROUP_EXIT_GRACE_S
    while True:
        alive = _group_members(pgid)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_system(argv: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Runs one system's benchmark; every failure comes back as a dict with an "error" key."""
    # Output goes to files, not pipes: a leftover grandchild holding a pipe open cannot make
    # this runner wait past the timeout.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=err, cwd=HERE, env=env, start_new_session=True
            )
        except OSError as exc:
            return {"error": f"Could not start {argv[0]}: {exc}."}
        # Its own session: the benchmark's procs share its process group, so one killpg
        # reaches everything it started.
        pgid = proc.pid
        timed_out = False
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(pgid)
            returncode = proc.wait()
        wall = time.perf_counter() - t0
        leftovers = _leftovers(pgid)
        if leftovers:
            _kill_group(pgid)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()

    parsed = _last_json_object(stdout)
    result: dict[str, Any] = parsed if parsed is not None else {}
    result["wall_s"] = round(wall, 1)
    result["returncode"] = returncode
    if leftovers:  # killed above; what they were, to find who left them
        result["left_processes_behind"] = leftovers
    if timed_out:
        result["error"] = f"Timed out after {timeout:.0f} s; its process group was killed."
    elif parsed is None:
        result["error"] = f"Exited with status {returncode} without printing a JSON report."
    if "error" in result or returncode != 0:
        result["stderr_tail"] = stderr[-3000:]
    return result


def _figure(report: dict[str, Any], system: str, workload: str, key: str) -> float | None:
    value = report.get(system, {}).get(workload, {})
    if not isinstance(value, dict):
        return None
    figure = value.get(key)
    return float(figure) if isinstance(figure, (int, float)) and figure > 0 else None


def _ratios(report: dict[str, Any], num: str, den: str, with_raw_socket: bool) -> dict[str, Any]:
    # (workload, key in num, key in den, higher is better)
    pairs = [(w, k, k, higher) for w, k, higher in FIGURES]
    if with_raw_socket:
        pairs += [(w, k, "raw_socket_GBps", True) for w, k, _ in FIGURES if w == "W5"]
    ratios: dict[str, Any] = {}
    for workload, key, den_key, higher in pairs:
        a = _figure(report, num, workload, key)
        b = _figure(report, den, workload, den_key)
        if a is None or b is None:
            continue
        name = f"{workload}.{key}" + (f" / {den_key}" if den_key != key else "")
        ratios[name] = {"ratio": round(a / b, 3), "better": "higher" if higher else "lower"}
    return ratios


def _targets(report: dict[str, Any]) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    for name, workload, key, base, base_key, op, bound in TARGETS:
        a = _figure(report, "ours", workload, key)
        b = _figure(report, base, workload, base_key)
        entry: dict[str, Any] = {
            "target": f"ours.{workload}.{key} {op} {bound} x {base}.{base_key}"
        }
        if a is None or b is None:
            missing = [s for s, v in (("ours", a), (base, b)) if v is None]
            entry.update(met=None, why=f"No figure from {' and '.join(missing)} in this run.")
        else:
            ratio = a / b
            entry.update(
                ratio=round(ratio, 3), met=ratio <= bound if op == "<=" else ratio >= bound
            )
        checks[name] = entry
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="about 10x smaller counts")
    parser.add_argument("--only", default=",".join(ALL_WORKLOADS), help="e.g. W1,W3")
    parser.add_argument("--systems", default=None, help="e.g. ours,floor (default: all)")
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout of an earlier commit, run as the system 'before'")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per system")
    parser.add_argument("--output", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    args.only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    default = ALL_SYSTEMS if args.before else ALL_SYSTEMS[:-1]
    systems = [s.strip() for s in (args.systems or ",".join(default)).split(",") if s.strip()]
    for bad, allowed, what in (
        (args.only, ALL_WORKLOADS, "workload"),
        (systems, ALL_SYSTEMS, "system"),
    ):
        unknown = [x for x in bad if x not in allowed]
        if unknown:
            parser.error(f"Unknown {what}(s) {unknown}; choose from {list(allowed)}.")
    timeout = args.timeout or (300.0 if args.quick else 900.0)

    report: dict[str, Any] = {
        "quick": args.quick,
        "workloads": args.only,
        "host": {"python": platform.python_version(), "cpus": os.cpu_count()},
        **load_before(),
    }
    commands = _commands(args)
    for system in systems:
        command = commands[system]
        if isinstance(command, str):
            _log(f"{system}: skipped: {command}")
            report[system] = {"error": command}
            continue
        argv_, env = command
        _log(f"{system}: {' '.join(argv_)}")
        report[system] = run_system(argv_, env, timeout)
        status = report[system].get("error", "ok")
        _log(f"{system}: {status} ({report[system]['wall_s']} s)")
        report[system].update(load_after())

    report["ratios"] = {
        "note": "ratio = first system's figure / second's; 'better' says which way is good",
        "ours/torchmonarch": _ratios(report, "ours", "torchmonarch", False),
        "ours/floor": _ratios(report, "ours", "floor", True),
        "torchmonarch/floor": _ratios(report, "torchmonarch", "floor", True),
    }
    if "before" in systems:
        report["ratios"]["ours/before"] = _ratios(report, "ours", "before", False)
    report["targets"] = _targets(report)
    text = json.dumps(report, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n")
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
