"""Chaos soak across two network-namespace hosts: calls in waves while procs, hosts and links fail.

    sudo python benchmarks/chaos_soak.py [--calls 20000] [--wave 500] [--faults-per-kind 3]
                                         [--seed N] [--heartbeat-timeout 1s]

Two network namespaces joined by veth pairs and a bridge (tests/hosts/netns.py) are two
machines; each runs a `monarch worker --address tcp://<its ip>:26600` (no Dask scheduler). This
process, the controller, listens on the bridge's address in the root namespace and attaches to
each host as its own host mesh (`attach_to_workers`), spawns 2 procs per host and an `Echo`
actor on them: 4 ranks, each a one-rank slice whose `echo(i)` returns `i` after a 1 ms sleep.

The calls go in waves of `--wave`, round-robin over the 4 ranks, a whole wave issued before any
reply is read (hundreds in flight). `--faults-per-kind` faults of each kind land in random waves
(seeded), each once a random fraction (10-50 %) of its wave has answered, so calls are queued on
the victims when it hits:

* `proc_kill`: SIGKILL of one proc (one rank affected);
* `host_kill`: SIGKILL of a host's `monarch worker` (both ranks of that host);
* `net_cut`: `ip link set <veth> down` on the host's link to the bridge (both ranks): nothing
  answers and nothing is reset, so only heartbeats can tell; the link stays down `--cut-s`.

After the wave has resolved, the fault is repaired: a killed proc is replaced by a new proc on
the same host; a killed worker is restarted in its namespace at the same address (another
incarnation there) and attached again; a cut link is brought up and the same worker, which has
dropped its silent client by then, is attached again. The next wave uses the new ranks.

Host and proc liveness are set by `--heartbeat-interval`/`--heartbeat-timeout`, both for procs
(`heartbeat_*`) and hosts (`host_heartbeat_*`), in the controller and the workers (through their
MONARCH_* environment), so that a fault is detected within about the timeout.

Figures (the value a correct runtime must have in brackets):

* `resolution_ms[kind]`: over the futures of the calls to the ranks a fault affected that were
  pending at the fault or issued after it, the time from the fault (or the call's issue, if
  later) to the future's resolution, value or error: `n`, `p50`, `p99`, `max`,
  `within_bound` (the fraction under `--bound-s`, target 2 s) and the slowest call.
* `unresolved` (0): futures not resolved when the soak ends (each wave gets `DRAIN_TIMEOUT`).
* `replies_lost` (0): calls to ranks no fault affected that did not return their argument;
  `replies_lost_where` counts them per wave and rank slot, `replies_lost_samples` shows errors.
* `wrong_values` (0): calls, to any rank, that returned something other than their argument.
* `affected_outcomes`: values / SupervisionError / other errors among the affected calls.
* `leaked_pids` ({}): per namespace, processes still alive `EXIT_GRACE` seconds after the final
  shutdown (the workers exit on it; every proc, repaired or not, must be gone).
* `faults`: each fault with its wave, victim, time and repair time; `wall_s`,
  `load_avg_1m_before`, `load_avg_1m_after` (`_report`'s; reports before it had `load_before`/
  `load_after`, the 1, 5 and 15-minute averages), `commit`.

Needs root and iproute2: without them the report is only `{"skipped": why}`. Asserts nothing:
it exits 0 whenever it could print its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The repository (for tests.hosts.netns) and this folder (for _report, also when a test imports
# this module as benchmarks.chaos_soak).
sys.path[:0] = [str(REPO), str(HERE)]

from _report import load_after, load_before, percentile  # noqa: E402

import monarch.actor  # noqa: E402
from monarch._rust_bindings.monarch_hyperactor.supervision import SupervisionError  # noqa: E402
from monarch.actor import Actor, attach_to_workers, enable_transport, endpoint  # noqa: E402
from monarch.config import configure  # noqa: E402
from tests.hosts.netns import (  # noqa: E402
    Namespaces,
    cannot_make_namespaces,
    ip,
    wait_listening,
)

WORKER_PORT = 26600
# Bound on one wave's futures resolving, counted from the end of its issue.
DRAIN_TIMEOUT = 20.0
# Bound on any control call: attach, spawn, pid, shutdown.
CONTROL_TIMEOUT = 60.0
# How long the processes of a namespace get to end after the final shutdown.
EXIT_GRACE = 10.0
# Fraction of a fault's wave answered when it is injected: drawn uniformly from this range.
FAULT_AT = (0.10, 0.50)
KINDS = ("proc_kill", "host_kill", "net_cut")
PROCS_PER_HOST = 2


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (no such process, or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
    return state in (b"Z", b"X")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


@dataclass
class Rank:
    """One Echo target: a one-rank slice on host `host`, served by process `pid`."""

    host: int
    echo: Any
    pid: int


@dataclass
class Wave:
    """The calls of one wave and when each was issued and resolved (0.0 while pending)."""

    first: int
    targets: list[int]  # rank slot of each call
    issued: list[float] = field(default_factory=list)
    completed: list[float] = field(default_factory=list)
    futures: list[Any] = field(default_factory=list)
    rejected: dict[int, BaseException] = field(default_factory=dict)


class Cluster:
    """The two namespace hosts, their workers and host meshes, and the 4 current ranks."""

    def __init__(self, spaces: Namespaces, env: dict[str, str], log: Any) -> None:
        self.spaces = spaces
        self.env = env
        self.log = log
        n = len(spaces.names)
        self.addrs = [f"tcp://{spaces.ips[h]}:{WORKER_PORT}" for h in range(n)]
        self.workers: list[subprocess.Popen[bytes]] = []  # every worker ever started
        self.current: list[subprocess.Popen[bytes] | None] = [None] * n
        self.meshes: list[Any] = [None] * n  # current host mesh per host
        self.ranks: list[Rank] = []  # slot h * PROCS_PER_HOST + p
        self.all_pids: set[int] = set()

    def start_worker(self, h: int) -> None:
        proc = self.spaces.popen(h, [sys.executable, "-m", "monarch._src.hosts.worker_cli",
                                     "--address", self.addrs[h]], self.env, str(REPO),
                                 stderr=self.log)
        self.workers.append(proc)
        self.current[h] = proc
        wait_listening(proc, self.spaces.ips[h], WORKER_PORT, CONTROL_TIMEOUT)

    def attach(self, h: int, attempts: int = 5) -> None:
        """Attach host `h` again (a worker that still serves its dropped client refuses: retry)."""
        for attempt in range(attempts):
            mesh = attach_to_workers(ca="trust_all_connections", workers=[self.addrs[h]])
            try:
                mesh.initialized.get(timeout=CONTROL_TIMEOUT)
            except Exception:
                if attempt == attempts - 1:
                    raise
                threading.Event().wait(0.5)
                continue
            self.meshes[h] = mesh
            return

    def spawn(self, h: int, count: int) -> list[Rank]:
        procs = self.meshes[h].spawn_procs(per_host={"gpus": count})
        echo = procs.spawn("echo", Echo)
        ranks = []
        for g in range(count):
            one = echo.slice(gpus=g)
            pid = one.pid.call_one().get(timeout=CONTROL_TIMEOUT)
            one.echo.call_one(-1).get(timeout=CONTROL_TIMEOUT)  # warm the path
            self.all_pids.add(pid)
            ranks.append(Rank(h, one, pid))
        return ranks

    def bring_up(self) -> None:
        for h in range(len(self.addrs)):
            self.start_worker(h)
            self.attach(h)
            self.ranks.extend(self.spawn(h, PROCS_PER_HOST))

    def host_slots(self, h: int) -> list[int]:
        return [s for s, r in enumerate(self.ranks) if r.host == h]

    def shutdown(self) -> list[str]:
        errors = []
        for h, mesh in enumerate(self.meshes):
            try:
                mesh.shutdown().get(timeout=CONTROL_TIMEOUT)
            except Exception as exc:
                errors.append(f"host {h}: {type(exc).__name__}: {exc}")
        return errors


class Echo(Actor):
    @endpoint
    async def echo(self, i: int) -> int:
        await asyncio.sleep(0.001)
        return i

    @endpoint
    async def pid(self) -> int:
        return os.getpid()


def schedule(rng: random.Random, waves: int, per_kind: int) -> dict[int, str]:
    """wave index -> fault kind: `per_kind` of each kind, in random waves (never the first)."""
    kinds = [k for k in KINDS for _ in range(per_kind)]
    if waves - 1 < len(kinds):
        raise SystemExit(f"{len(kinds)} faults need at least {len(kinds) + 1} waves; raise "
                         "--calls or lower --wave or --faults-per-kind.")
    rng.shuffle(kinds)
    return dict(zip(sorted(rng.sample(range(1, waves), len(kinds))), kinds))


def run_soak(args: argparse.Namespace, spaces: Namespaces, log: Any) -> dict[str, Any]:
    enable_transport(f"tcp://{spaces.gateway}:0")
    beat = {"heartbeat_interval": args.heartbeat_interval,
            "heartbeat_timeout": args.heartbeat_timeout,
            "host_heartbeat_interval": args.heartbeat_interval,
            "host_heartbeat_timeout": args.heartbeat_timeout}
    configure(**beat)
    reports: list[tuple[float, str]] = []
    monarch.actor.unhandled_fault_hook = lambda f: reports.append((time.monotonic(), str(f)))
    env = dict(os.environ, PYTHONPATH=str(REPO), MONARCH_PRESTART="0",
               **{f"MONARCH_{k.upper()}": v for k, v in beat.items()})
    rng = random.Random(args.seed)
    wall_start = time.monotonic()
    cluster = Cluster(spaces, env, log)
    cluster.bring_up()
    setup_s = time.monotonic() - wall_start

    n_waves = (args.calls + args.wave - 1) // args.wave
    plan = schedule(rng, n_waves, args.faults_per_kind)
    faults: list[dict[str, Any]] = []
    waves: list[Wave] = []
    # Per call: the fault record affecting it (None: its rank was not affected).
    affected_by: dict[int, dict[str, Any]] = {}
    lock = threading.Lock()

    for w in range(n_waves):
        first = w * args.wave
        count = min(args.wave, args.calls - first)
        nslots = len(cluster.ranks)
        wave = Wave(first, [(first + k) % nslots for k in range(count)])
        wave.issued = [0.0] * count
        wave.completed = [0.0] * count
        wave.futures = [None] * count
        waves.append(wave)
        kind = plan.get(w)
        trigger = threading.Event()
        threshold = max(1, int(count * rng.uniform(*FAULT_AT))) if kind else -1
        answered = [0]
        fault: dict[str, Any] = {}
        if kind == "proc_kill":
            slot = rng.randrange(nslots)
            fault = {"kind": kind, "wave": w, "host": cluster.ranks[slot].host,
                     "slots": [slot], "pid": cluster.ranks[slot].pid}
        elif kind:
            h = rng.randrange(len(cluster.addrs))
            fault = {"kind": kind, "wave": w, "host": h, "slots": cluster.host_slots(h)}

        # Every name of this wave is bound now: a reply that comes after the wave's drain timed
        # out calls back during a later wave, and must count in its own wave.
        def on_done(
            k: int,
            wave: Wave = wave,
            answered: list[int] = answered,
            threshold: int = threshold,
            trigger: threading.Event = trigger,
        ) -> None:
            wave.completed[k] = time.monotonic()
            with lock:
                answered[0] += 1
                hit = answered[0] == threshold
            if hit:
                trigger.set()

        def inject(fault: dict[str, Any] = fault, trigger: threading.Event = trigger) -> None:
            if not trigger.wait(DRAIN_TIMEOUT):
                return
            fault["at"] = time.monotonic()
            if fault["kind"] == "proc_kill":
                os.kill(fault["pid"], signal.SIGKILL)
            elif fault["kind"] == "host_kill":
                worker = cluster.current[fault["host"]]
                assert worker is not None
                fault["pid"] = worker.pid
                os.kill(worker.pid, signal.SIGKILL)
            else:
                ip("link", "set", spaces.links[fault["host"]], "down")

        injector = threading.Thread(target=inject, name="chaos-inject", daemon=True)
        if kind:
            injector.start()
        for k in range(count):
            wave.issued[k] = time.monotonic()
            try:
                fut = cluster.ranks[wave.targets[k]].echo.echo.call_one(first + k)
            except Exception as exc:  # the fault was known already: refused at the call site
                wave.completed[k] = time.monotonic()
                wave.rejected[k] = exc
                on_done(k)
                continue
            wave.futures[k] = fut
            fut.add_done_callback(lambda _f, k=k, on_done=on_done: on_done(k))
        deadline = time.monotonic() + DRAIN_TIMEOUT
        for fut in wave.futures:
            if fut is not None:
                try:
                    fut.exception(timeout=max(0.0, deadline - time.monotonic()))
                except TimeoutError:  # counted as unresolved when the outcomes are read
                    pass
        if not kind:
            continue
        injector.join(timeout=DRAIN_TIMEOUT)
        faults.append(fault)
        if "at" not in fault:
            fault["error"] = "never injected: the wave did not reach its threshold"
            continue
        for k, slot in enumerate(wave.targets):
            if slot in fault["slots"]:
                affected_by[first + k] = fault
        repair_start = time.monotonic()
        h = fault["host"]
        if kind == "proc_kill":
            cluster.ranks[fault["slots"][0]] = cluster.spawn(h, 1)[0]
        else:
            if kind == "host_kill":
                cluster.current[h].wait(timeout=CONTROL_TIMEOUT)  # type: ignore[union-attr]
                cluster.start_worker(h)
            else:
                hold = args.cut_s - (time.monotonic() - fault["at"])
                if hold > 0:
                    threading.Event().wait(hold)
                ip("link", "set", spaces.links[h], "up")
                # The link carries traffic again only a moment later (EHOSTUNREACH until then).
                wait_listening(cluster.current[h], spaces.ips[h], WORKER_PORT,  # type: ignore
                               CONTROL_TIMEOUT)
            cluster.attach(h)
            for slot, rank in zip(cluster.host_slots(h), cluster.spawn(h, PROCS_PER_HOST)):
                cluster.ranks[slot] = rank
        fault["repair_s"] = round(time.monotonic() - repair_start, 3)

    # Outcomes of every call.
    values = replies_lost = wrong_values = unresolved = 0
    outcome = {"value": 0, "SupervisionError": 0, "other": 0}
    other_samples: list[str] = []
    lost_samples: list[str] = []
    lost_where: dict[str, int] = {}  # "wave W slot S" -> replies lost there
    latencies: dict[str, list[tuple[float, int]]] = {k: [] for k in KINDS}
    for w, wave in enumerate(waves):
        for k, fut in enumerate(wave.futures):
            i = wave.first + k
            fault = affected_by.get(i)
            if k in wave.rejected:
                error: BaseException | None = wave.rejected[k]
            elif not fut.done():
                unresolved += 1
                if fault is None:
                    replies_lost += 1
                continue
            else:
                error = fut.exception(timeout=0)
            if error is None:
                if fut.get() != i:
                    wrong_values += 1
                    if fault is None:
                        replies_lost += 1
                    continue
                values += 1
            elif fault is None:
                replies_lost += 1
                where = f"wave {w} slot {wave.targets[k]}"
                lost_where[where] = lost_where.get(where, 0) + 1
                if lost_where[where] == 1 and len(lost_samples) < 5:
                    lost_samples.append(f"call {i} (slot {wave.targets[k]}): "
                                        f"{type(error).__name__}: {str(error)[:1000]}")
            if fault is None:
                continue
            name = "value" if error is None else (
                "SupervisionError" if isinstance(error, SupervisionError) else "other")
            outcome[name] += 1
            if name == "other" and len(other_samples) < 5:
                other_samples.append(f"{type(error).__name__}: {str(error)[:1000]}")
            if wave.completed[k] >= fault["at"] or wave.issued[k] >= fault["at"]:
                took = wave.completed[k] - max(fault["at"], wave.issued[k])
                latencies[fault["kind"]].append((took, i))

    shutdown_errors = cluster.shutdown()
    for proc in cluster.workers:
        try:
            proc.wait(timeout=CONTROL_TIMEOUT)
        except subprocess.TimeoutExpired:  # its processes then show in leaked_pids
            pass
    leaked: dict[str, list[str]] = {}
    deadline = time.monotonic() + EXIT_GRACE
    pause = threading.Event()
    for h, ns in enumerate(spaces.names):
        while True:
            alive = [p for p in spaces.pids(h) if not process_gone(p)]
            if not alive or time.monotonic() >= deadline:
                break
            pause.wait(0.1)
        if alive:
            leaked[ns] = [f"{p}: {cmdline(p)}" for p in alive]
    stray = sorted(p for p in cluster.all_pids if not process_gone(p))

    def figures(pairs: list[tuple[float, int]]) -> dict[str, Any]:
        pairs.sort()
        xs = [t for t, _ in pairs]
        ms = lambda s: None if s is None else round(s * 1e3, 1)  # noqa: E731
        return {"n": len(xs), "p50": ms(percentile(xs, 0.5)), "p99": ms(percentile(xs, 0.99)),
                "max": ms(xs[-1] if xs else None),
                "within_bound": round(sum(t <= args.bound_s for t in xs) / len(xs), 4)
                if xs else None,
                "slowest_call": pairs[-1][1] if pairs else None}

    for fault in faults:
        if "at" in fault:
            fault["at_s"] = round(fault.pop("at") - wall_start, 3)
    return {
        "calls": args.calls,
        "wave": args.wave,
        "hosts": len(spaces.names),
        "ranks": len(cluster.ranks),
        "worker_mode": "monarch worker --address (no Dask scheduler)",
        "config": beat,
        "bound_s": args.bound_s,
        "resolution_ms": {k: figures(v) for k, v in latencies.items()},
        "affected_outcomes": outcome,
        "other_error_samples": other_samples,
        "values": values,
        "unresolved": unresolved,
        "replies_lost": replies_lost,
        "replies_lost_where": lost_where,
        "replies_lost_samples": lost_samples,
        "wrong_values": wrong_values,
        "fault_reports": len(reports),
        "faults": faults,
        "shutdown_errors": shutdown_errors,
        "leaked_pids": leaked,
        "procs_alive_after_shutdown": stray,
        "setup_s": round(setup_s, 3),
        "wall_s": round(time.monotonic() - wall_start, 3),
    }


def commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except OSError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls issued (default 20000)")
    parser.add_argument("--wave", type=int, default=500, help="calls per wave (default 500)")
    parser.add_argument("--faults-per-kind", type=int, default=3,
                        help="faults of each kind: proc_kill, host_kill, net_cut (default 3)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fault schedule")
    parser.add_argument("--heartbeat-interval", default="100ms",
                        help="heartbeat_interval and host_heartbeat_interval (default 100ms)")
    parser.add_argument("--heartbeat-timeout", default="1s",
                        help="heartbeat_timeout and host_heartbeat_timeout (default 1s)")
    parser.add_argument("--cut-s", type=float, default=2.0,
                        help="seconds a cut link stays down at least (default 2)")
    parser.add_argument("--bound-s", type=float, default=2.0,
                        help="the resolution bound reported as within_bound (default 2)")
    parser.add_argument("--log", default=None,
                        help="file for the workers' stderr (default: a temporary file)")
    args = parser.parse_args()
    if args.calls < 1 or args.wave < 1 or args.faults_per_kind < 0:
        parser.error("--calls and --wave must be positive, --faults-per-kind not negative")
    why = cannot_make_namespaces()
    if why is not None:  # a report still, so that all.py records why instead of failing
        json.dump({"skipped": why, "commit": commit(), **load_before()}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    args.seed = seed
    before_load = load_before()
    log_path = args.log or tempfile.mkstemp(prefix="chaos-soak-", suffix=".log")[1]
    spaces = Namespaces(2)
    try:
        with open(log_path, "ab") as log:
            report = run_soak(args, spaces, log)
    finally:
        spaces.close()
    report.update(seed=seed, commit=commit(), **before_load, **load_after(), worker_log=log_path)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    sys.stdout.flush()
    os._exit(0)  # the runtime's threads are not waited for: the figures are out


if __name__ == "__main__":
    sys.exit(main())
