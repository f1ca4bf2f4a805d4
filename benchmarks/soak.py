"""Soak under proc deaths: many calls in flight while procs are SIGKILLed; prints one JSON object.

    python benchmarks/soak.py [--calls 20000] [--kills 2] [--procs 4] [--seed 0]

Four procs (`this_host().spawn_procs(per_host={"gpus": 4})`) each run one `Echo` actor whose
`echo(i)` returns `i` after a 1 ms cooperative sleep. Actor messages are handled one at a time, so
the calls queue up on the procs and thousands are in flight at once. The calls go round-robin to
the four one-rank slices `mesh.slice(gpus=r)`, all issued before any is read. A killer thread
SIGKILLs `--kills` procs, each once its rank has answered a random fraction (5-60 %) of its calls,
so every kill lands while that rank still has calls queued. A recording
`monarch.actor.unhandled_fault_hook` is installed first: a proc death reaches it.

Every call's completion time is taken in a `Future.add_done_callback`, on the thread that completes
the future, so the latency figures are those of the runtime, not of the gathering loop. A call's
*detection latency* is measured for each call to a killed rank that failed: the time its failure
was observed minus the later of the kill and the call's own issue (a call made after the kill
cannot be failed before it exists). A call rejected at the call site (the death was already known)
counts as observed when `call_one` raised.

Figures (what they must be on a correct runtime in brackets):

* `calls`, `values`, `supervision_errors`, `other_errors` (0), `unresolved` (0): outcomes;
  `supervision_errors_without_exit_status` (0): those not naming the exit ("Killed(sig=9)");
  `rejected_at_call_site`: calls refused by `call_one` itself, the death being known already.
* `replies_lost` (0): calls to a rank that was not killed that did not return their own argument.
* `wrong_values` (0): calls, to any rank, that returned something other than their argument.
* `detection_latency_ms`: `p50`, `p99`, `max` and `n` over the failed calls to killed ranks.
* `fault_reports`: reports the fault hook received (one per kill); `fault_hook_latency_ms`: per
  kill, from the kill to the first report naming that rank (null: never reported).
* `unwatched_ranks` ([]): ranks the local host agent does not watch for exit (read from its
  internals); a killed one fails its calls with a transport error and is never reported.
* `fresh_call_ok`: a new call on a surviving slice answered after the soak.
* `procs_left_alive` ([]): pids of the procs still running (zombies count as gone) five
  seconds after `procs.stop()` returned.
* `wall_s`, `issue_s` (issuing all calls), `stop_s` (`procs.stop()`).
* `load_avg_1m_before`, `load_avg_1m_after`: `_report`'s load record around the soak.

The percentiles are `_report.percentile`'s nearest rank (before it, one rank higher when q times
the count was an odd whole number).

This program asserts nothing; it exits 0 whenever it could print its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import random
import re
import signal
import sys
import threading
import time
from typing import Any

from _report import load_after, load_before, percentile

import monarch.actor
from monarch._src.hosts.local import local_agent
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, endpoint, this_host

# Bound on gathering every future, counted from the start of gathering.
GATHER_TIMEOUT = 30.0
# Bound on any single control call (spawn, pid lookup, stop).
CONTROL_TIMEOUT = 60.0
# How long the stopped procs get to disappear before they count as left alive.
EXIT_GRACE = 5.0
# Fraction of a victim's calls answered before it is killed: drawn uniformly from this range.
KILL_AT = (0.05, 0.60)


class Echo(Actor):
    @endpoint
    async def echo(self, i: int) -> int:
        await asyncio.sleep(0.001)
        return i

    @endpoint
    async def pid(self) -> int:
        return os.getpid()


class HookRecorder:
    """A fault hook that keeps `(monotonic time, text)` of every report; any thread may call it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reports: list[tuple[float, str]] = []  # only appended to

    def __call__(self, failure: Any) -> None:
        now = time.monotonic()
        text = str(failure)
        with self._lock:
            self.reports.append((now, text))

    def snapshot(self) -> list[tuple[float, str]]:
        with self._lock:
            return list(self.reports)


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs: no such process, or a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    except OSError:  # not Linux: fall back on signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    # The command name (field 2) is parenthesised and may hold spaces; the state follows it.
    state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
    return state in (b"Z", b"X")


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait up to `timeout` seconds for every pid to end; returns those still running."""
    deadline = time.monotonic() + timeout
    idle = threading.Event()  # never set: its wait is a bounded pause between observations
    while True:
        alive = [p for p in pids if not process_gone(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        idle.wait(0.05)


def soak(calls: int, kills: int, nprocs: int, seed: int) -> dict[str, Any]:
    if not 0 <= kills < nprocs:
        raise SystemExit(f"--kills must be between 0 and {nprocs - 1}, so one proc survives.")
    rng = random.Random(seed)
    hook = HookRecorder()
    monarch.actor.unhandled_fault_hook = hook
    wall_start = time.monotonic()

    procs = this_host().spawn_procs(per_host={"gpus": nprocs})
    mesh = procs.spawn("soak", Echo)
    slices = [mesh.slice(gpus=r) for r in range(nprocs)]
    pids = [s.pid.call_one().get(timeout=CONTROL_TIMEOUT) for s in slices]
    for s in slices:  # warm every path before the clock starts
        s.echo.call_one(-1).get(timeout=CONTROL_TIMEOUT)
    # Ranks whose exit the local agent's child watch will not report (an internal of hosts/local:
    # a proc whose proc_ready beat the zygote's "spawned" reply is never watched).
    watched = set(local_agent()._by_pid)
    unwatched = [r for r, pid in enumerate(pids) if pid not in watched]

    victims = rng.sample(range(nprocs), kills)
    per_rank = [len(range(r, calls, nprocs)) for r in range(nprocs)]
    # rank -> completions after which it is killed; ranks not in the dict are never killed.
    kill_after = {r: max(1, int(per_rank[r] * rng.uniform(*KILL_AT))) for r in victims}
    kill_times: dict[int, float] = {}  # rank -> monotonic time just before its SIGKILL

    issued = [0.0] * calls  # monotonic time each call was issued
    completed = [0.0] * calls  # monotonic time each call's future completed; 0.0 while pending
    done_by_rank = [0] * nprocs
    count_lock = threading.Lock()
    due: queue.Queue[int] = queue.Queue()  # victims whose threshold was reached

    def on_done(i: int) -> None:
        completed[i] = time.monotonic()
        rank = i % nprocs
        with count_lock:
            done_by_rank[rank] += 1
            reached = done_by_rank[rank] == kill_after.get(rank)
        if reached:
            due.put(rank)

    def killer() -> None:
        for _ in range(kills):
            try:
                rank = due.get(timeout=GATHER_TIMEOUT + CONTROL_TIMEOUT)
            except queue.Empty:
                return
            kill_times[rank] = time.monotonic()
            os.kill(pids[rank], signal.SIGKILL)

    killer_thread = threading.Thread(target=killer, name="soak-killer", daemon=True)
    killer_thread.start()

    futures: list[Any] = [None] * calls
    rejected: dict[int, BaseException] = {}  # calls that raised at the call site
    issue_start = time.monotonic()
    for i in range(calls):
        issued[i] = time.monotonic()
        try:
            fut = slices[i % nprocs].echo.call_one(i)
        except Exception as exc:  # the death was already known when the call was made
            completed[i] = time.monotonic()
            rejected[i] = exc
            with count_lock:
                done_by_rank[i % nprocs] += 1
            continue
        futures[i] = fut
        fut.add_done_callback(lambda _f, i=i: on_done(i))
    issue_s = time.monotonic() - issue_start

    values = supervision_errors = other_errors = unresolved = replies_lost = wrong_values = 0
    without_status = 0  # supervision errors that do not name the exit (Killed(sig=9))
    other_samples: list[str] = []
    latencies: list[float] = []
    deadline = time.monotonic() + GATHER_TIMEOUT
    for i in range(calls):
        rank = i % nprocs
        killed = rank in kill_after
        if i in rejected:
            error: BaseException | None = rejected[i]
        else:
            try:
                error = futures[i].exception(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                unresolved += 1
                if not killed:
                    replies_lost += 1
                continue
        if error is None:
            value = futures[i].get()
            if value == i:
                values += 1
                continue
            wrong_values += 1
            if not killed:
                replies_lost += 1
            continue
        if not killed:
            replies_lost += 1
        if isinstance(error, SupervisionError):
            supervision_errors += 1
            if "Killed(sig=9)" not in str(error):
                without_status += 1
        else:
            other_errors += 1
            if len(other_samples) < 5:
                other_samples.append(f"rank {rank}: {type(error).__name__}: {error}")
        if killed and rank in kill_times:
            latencies.append(completed[i] - max(kill_times[rank], issued[i]))
    killer_thread.join(timeout=CONTROL_TIMEOUT)

    survivors = [r for r in range(nprocs) if r not in kill_after]
    fresh_call_ok = False
    fresh_call_error = None
    try:
        fresh_call_ok = slices[survivors[0]].echo.call_one(-2).get(timeout=CONTROL_TIMEOUT) == -2
    except Exception as exc:
        fresh_call_error = f"{type(exc).__name__}: {exc}"

    stop_start = time.monotonic()
    stop_error = None
    try:
        procs.stop().get(timeout=CONTROL_TIMEOUT)
    except Exception as exc:
        stop_error = f"{type(exc).__name__}: {exc}"
    stop_s = time.monotonic() - stop_start
    left_alive = wait_gone(pids, EXIT_GRACE)
    wall_s = time.monotonic() - wall_start

    reports = hook.snapshot()
    hook_latency: dict[str, float | None] = {}
    for rank, at in sorted(kill_times.items()):
        named = [t for t, text in reports if re.search(rf"crashed_ranks=\[{rank}\]", text)]
        hook_latency[str(rank)] = round((min(named) - at) * 1e3, 3) if named else None

    latencies.sort()
    ms = lambda s: None if s is None else round(s * 1e3, 3)  # noqa: E731
    return {
        "calls": calls,
        "procs": nprocs,
        "kills": [
            {"rank": r, "pid": pids[r], "after_answers": kill_after[r],
             "at_s": round(kill_times[r] - issue_start, 4) if r in kill_times else None}
            for r in victims
        ],
        "values": values,
        "supervision_errors": supervision_errors,
        "supervision_errors_without_exit_status": without_status,
        "rejected_at_call_site": len(rejected),
        "other_errors": other_errors,
        "other_error_samples": other_samples,
        "replies_lost": replies_lost,
        "wrong_values": wrong_values,
        "unresolved": unresolved,
        "detection_latency_ms": {
            "n": len(latencies),
            "p50": ms(percentile(latencies, 0.50)),
            "p99": ms(percentile(latencies, 0.99)),
            "max": ms(latencies[-1] if latencies else None),
        },
        "unwatched_ranks": unwatched,
        "fault_reports": len(reports),
        "fault_hook_latency_ms": hook_latency,
        "fresh_call_ok": fresh_call_ok,
        "fresh_call_error": fresh_call_error,
        "stop_error": stop_error,
        "procs_left_alive": left_alive,
        "issue_s": round(issue_s, 4),
        "stop_s": round(stop_s, 4),
        "wall_s": round(wall_s, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls issued (default 20000)")
    parser.add_argument("--kills", type=int, default=2, help="procs SIGKILLed (default 2)")
    parser.add_argument("--procs", type=int, default=4, help="procs spawned (default 4)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill schedule")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    before = load_before()
    report = soak(args.calls, args.kills, args.procs, seed)
    report.update(before, **load_after())
    report["seed"] = seed
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
