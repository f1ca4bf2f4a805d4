"""Restarting a Jupyter kernel that spawned procs: how long until those procs are gone.

A real ipykernel is started with jupyter_client's `KernelManager`; a cell spawns a mesh of 2
procs on `this_host()`, calls an actor on them (so they are really up) and prints their pids.
The kernel is then restarted, and the time from the restart request until every one of those
pids has ended is measured (a zombie, state `Z` in `/proc/<pid>/stat`, counts as ended: the
procs are the kernel's grandchildren, and whether their parent reaped them yet does not matter).
Three kinds of restart, `--runs` times each:

* `polite`: `restart_kernel()`, Jupyter's restart button: the kernel's process group is
  interrupted, the kernel gets a `shutdown_request` and exits (jupyter_client signals the group
  with SIGTERM, then SIGKILL, if it has not exited after half of `shutdown_wait_time`, then the
  other half); ipykernel 7, when psutil is installed (Dask's `distributed` requires it), first
  SIGTERMs every descendant in its process group and waits until none is left;
* `now`: `restart_kernel(now=True)`: the kernel's process group, procs included, is SIGKILLed;
* `kernel_killed`: only the kernel process is SIGKILLed (as the OOM killer or `kill -9 <pid>`
  does), so its procs must notice on their own that their controller died; the kernel is
  restarted once they are gone (or past `--deadline`);
* `kernel_killed_forked`: the same, with a child process the kernel forked still running (a
  `multiprocessing` worker under the fork start method, Linux's default before Python 3.14): it
  holds the kernel's end of the pipes it had, that of its fork server's stdin included.

Reported per kind, p50 and max of: `procs_gone_s`, from the restart request until the last of
those pids ended (the figure this benchmark is about); `kernel_gone_s`, until the old kernel
process ended; `restart_s`, until `restart_kernel` returned (a new kernel process started);
`ready_s`, until the new kernel answered a `kernel_info` request. With the load before and
after (`_report`'s `load_avg_1m_before`/`_after`; reports before it had `load_before`/
`load_after`, the 1, 5 and 15-minute averages). `--repo DIR` runs the kernel against another
checkout (e.g. the commit before a change, as a git worktree) for a before/after comparison in
one run. Prints one JSON report.

    .venv/bin/python benchmarks/kernel_restart.py [--runs 5] [--repo DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _report import load_after, load_before
from notebook_interrupt import until_idle  # same folder: the wait for a cell's end

REPO = Path(__file__).resolve().parents[1]

CELL = """
import os
from monarch.actor import Actor, endpoint, this_host

class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()

procs = this_host().spawn_procs(per_host={"gpus": 2})
print("PIDS", *sorted(procs.spawn("pid", Pid).pid.call().get(timeout=60).values()), flush=True)
"""

FORK = """
import multiprocessing, time
forked = multiprocessing.get_context("fork").Process(target=time.sleep, args=(300,), daemon=True)
forked.start()
"""

KINDS = ("polite", "now", "kernel_killed", "kernel_killed_forked")

# Pause between two looks at /proc while waiting for the procs to end.
POLL = 0.005


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) of `pid` from /proc/<pid>/stat, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            text = stat_file.read().decode(errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name (field 2) may hold spaces
    return fields[0], int(fields[19])


def _running(pid: int, start_time: int) -> bool:
    """False once `pid` exited (zombies included) or now belongs to another process."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[1] == start_time


def _spawn_procs(client: Any) -> list[tuple[int, int]]:
    """Run the cell; the procs' (pid, start time)."""
    messages = until_idle(client, client.execute(CELL))
    errors = [m["content"] for m in messages if m["msg_type"] == "error"]
    if errors:
        raise RuntimeError(f"The cell failed: {errors}")
    text = "".join(m["content"].get("text", "") for m in messages if m["msg_type"] == "stream")
    [line] = [ln for ln in text.splitlines() if ln.startswith("PIDS ")]
    procs = []
    for pid in map(int, line.split()[1:]):
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            raise RuntimeError(f"Proc {pid} ended before the restart.")
        procs.append((pid, stat[1]))
    return procs


def _restart_once(manager: Any, client: Any, procs: list[tuple[int, int]], kind: str,
                  deadline_s: float) -> dict[str, float | None]:
    """Restart the kernel; seconds from the request until every proc ended (`procs_gone_s`,
    None past `deadline_s`), until the old kernel process ended (`kernel_gone_s`), until the
    restart call returned (`restart_s`) and until the new kernel answered (`ready_s`). The
    restart call blocks until the old kernel is gone, so the processes are watched from another
    thread meanwhile. For `kernel_killed*` the request is the SIGKILL of the kernel process."""
    kernel = manager.provisioner.process.pid
    stat = _stat(kernel)
    assert stat is not None
    watched = {"procs_gone_s": list(procs), "kernel_gone_s": [(kernel, stat[1])]}
    ended: dict[str, float | None] = {name: None for name in watched}
    started = threading.Event()
    t0 = 0.0

    def watch() -> None:
        started.wait()
        left = dict(watched)
        while left and time.monotonic() - t0 < deadline_s:
            for name, pids in list(left.items()):
                left[name] = [p for p in pids if _running(*p)]
                if not left[name]:
                    ended[name] = time.monotonic() - t0
                    del left[name]
            if left:
                time.sleep(POLL)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    started.set()
    if kind.startswith("kernel_killed"):
        os.kill(kernel, signal.SIGKILL)
        # Restarting signals the kernel's process group: only once the procs ended by themselves.
        watcher.join()
        manager.restart_kernel(now=True)
    else:
        manager.restart_kernel(now=kind == "now")
    restart_s = time.monotonic() - t0
    client.wait_for_ready(timeout=60)
    ready_s = time.monotonic() - t0
    watcher.join()
    return {**ended, "restart_s": restart_s, "ready_s": ready_s}


def _summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"p50": None, "max": None, "all": []}
    return {"p50": round(statistics.median(values), 3), "max": round(max(values), 3),
            "all": [round(v, 3) for v in values]}


def measure(repo: Path, runs: int, deadline_s: float) -> dict[str, Any]:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo)
    out: dict[str, Any] = {}
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(repo), env=env,
                                       startup_timeout=60)
    try:
        for kind in KINDS:
            figures: dict[str, list[float]] = {}
            left = 0
            for _ in range(runs):
                procs = _spawn_procs(client)
                if kind == "kernel_killed_forked":
                    until_idle(client, client.execute(FORK))
                run = _restart_once(manager, client, procs, kind, deadline_s)
                if run["procs_gone_s"] is None:
                    left += 1
                    for pid, start_time in procs:  # do not let them disturb the next run
                        if _running(pid, start_time):
                            os.kill(pid, 9)
                for name, seconds in run.items():
                    if seconds is not None:
                        figures.setdefault(name, []).append(seconds)
            out[kind] = {name: _summary(figures.get(name, []))
                         for name in ("procs_gone_s", "kernel_gone_s", "restart_s", "ready_s")}
            out[kind]["runs_with_procs_left"] = left  # procs still there after `deadline_s`
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="restarts of each kind")
    parser.add_argument("--deadline", type=float, default=30.0,
                        help="seconds to wait for the procs to end before counting them as left")
    parser.add_argument("--repo", action="append", default=[],
                        help="another checkout to measure (repeatable); this one is always last")
    args = parser.parse_args()
    report: dict[str, Any] = {"workload": "kernel restart", "runs": args.runs,
                              "cpus": os.cpu_count(), **load_before()}
    for repo in [*map(Path, args.repo), REPO]:
        report[str(repo)] = measure(repo, args.runs, args.deadline)
    report.update(load_after())
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
