"""W7 part (b): many procs and hosts, simulated in one process (this package's internal API).

Run through `python benchmarks/w7.py --part b`. Every "proc" is a real proc agent without its
own OS process: a `Mailbox` listening on Dask's `inproc://`, with the proc agent's control
operations installed (`mesh.agent.install_agent`, as every proc has them), so `ProcMesh.spawn`
places a real `HostedActor` (its own thread) in it and `call()` travels the real path: the
controller's runtime (its usual loopback transport) encodes and posts the calls, the agents'
mailboxes receive them over inproc, the actors answer over the controller's listen address.
All agents share one event loop on one thread (`w7-agents`), apart from the controller's.

Dask's inproc comm costs the sender a task and a cross-thread wake-up (a self-pipe write) per
message, where a tcp peer is written synchronously by `SocketChannel.write_now`.
`--agent-transport tcp` gives each agent a loopback tcp port instead, so the controller writes
as it does to real procs, at the price of one socket pair per agent.

What is measured per `call()` of a no-op endpoint, after a warm-up:

* `p50_ms`, `p99_ms`: the latency of `call(i).get()`. Everything runs in one interpreter here,
  so this includes the agents' and actors' own work under one GIL: read it as an upper bound.
* `controller_cpu_us`: CPU time of the controller's two threads (the calling thread and the
  `monarch-runtime` loop), per call, from their thread CPU clocks; the agents' and actors'
  threads are not counted.
* `controller_bytes`, `controller_envelopes`, `controller_batches`: what the controller's
  transport wrote per call (the frames of every batch it encoded), counted by wrapping the
  transport's batch encoder on the controller's two threads only.

Meshes: `agents<N>`, a one-dimensional mesh of N agents on one host; and `hosts<H>x<R>`, H
simulated hosts with R ranks each (dimensions `hosts`, `procs`), for each H of `--hosts` and R of
`--per-host`. Rank r lives on host r // R (given to the `ProcTable` where it records hosts). A
flat cast posts one envelope per rank, so the controller's cost grows with H x R; a cast through
one relay per host would grow with H only. `scaling` compares,
per H, the largest R against R = 1 (`ratio` near R: grows with ranks; near 1: with hosts), and
gives the latency per log2(H).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import math
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import workloads as wl

from monarch._src.mesh.agent import install_agent
from monarch._src.mesh.proc_mesh import ProcMesh, ProcTable
from monarch._src.runtime.mailbox import Mailbox
from monarch._src.runtime.runtime import Runtime, get_runtime
from monarch._src.shape import Shape, Slice
from monarch._src.transport import comm
from monarch.actor import Actor, endpoint

GET_TIMEOUT_S = 300.0


class Echo(Actor):
    """The actor on every simulated proc."""

    @endpoint
    def noop(self, i: int) -> int:
        return i


class Agents:
    """`n` proc agents listening on `listen` (`inproc://`, or `tcp://127.0.0.1:0`: one port
    each), driven by one event loop on one thread."""

    def __init__(self, n: int, listen: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="w7-agents",
                                       daemon=True)
        self.thread.start()
        self.mailboxes: list[Mailbox] = []
        self.addresses: list[str] = self._submit(self._start(n, listen)).result(GET_TIMEOUT_S)

    def _submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def _start(self, n: int, listen: str) -> list[str]:
        for i in range(n):
            mailbox = Mailbox(self.loop)
            await mailbox.start(listen)
            rt = Runtime(self.loop, mailbox, f"w7-agent-{i}", False)
            rt.loop_thread = mailbox.loop_thread = self.thread
            install_agent(rt)
            self.mailboxes.append(mailbox)
        return [mb.address for mb in self.mailboxes]

    def close(self) -> None:
        async def close_all() -> None:
            for mailbox in self.mailboxes:
                await mailbox.close()

        self._submit(close_all()).result(GET_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(GET_TIMEOUT_S)


class WriteCounter:
    """Counts what the controller's transport writes: batches, envelopes and frame bytes.

    Wraps `comm.encode_batch`, which every peer's writer calls once per batch, and counts only
    the calls made on the controller's threads: its loop, and the calling thread, which may
    write a call straight to a socket (the agents and actors encode on their own threads)."""

    def __init__(self, controller_threads: list[threading.Thread]) -> None:
        self.idents = {thread.ident for thread in controller_threads}
        self.batches = self.envelopes = self.bytes = 0

    @contextmanager
    def installed(self) -> Iterator[WriteCounter]:
        original = comm.encode_batch

        def counting(envelopes: Sequence[Any]) -> list[Any]:
            frames = original(envelopes)
            if threading.get_ident() in self.idents:
                self.batches += 1
                self.envelopes += len(envelopes)
                self.bytes += sum(memoryview(f).nbytes for f in frames)
            return frames

        comm.encode_batch = counting
        try:
            yield self
        finally:
            comm.encode_batch = original

    def snapshot(self) -> tuple[int, int, int]:
        return self.batches, self.envelopes, self.bytes


def _thread_cpu_s(threads: list[threading.Thread]) -> float:
    """CPU seconds used so far by `threads` (Linux thread CPU clocks)."""
    total = 0.0
    for thread in threads:
        assert thread.ident is not None
        total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return total


def _sim_mesh(addresses: list[str], labels: list[str], sizes: list[int], name: str,
              per_host: int | None) -> ProcMesh:
    """A proc mesh over already-running agents, as `spawn_procs` would return it once up; with
    `per_host`, rank r is on simulated host r // per_host, recorded in the table
    (`ProcTable.hosts`, what a cast tree reads)."""
    hosts = None if per_host is None else [rank // per_host for rank in range(len(addresses))]
    table = ProcTable(list(addresses), hosts=hosts)
    table.name = name
    strides = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    return ProcMesh._create(table, Shape(labels, Slice(offset=0, sizes=sizes, strides=strides)),
                            host=None, name=name, owned=True)


def measure(agents: Agents, counter: WriteCounter, labels: list[str], sizes: list[int],
            calls: int, per_host: int | None) -> dict[str, Any]:
    """Spawn Echo on a mesh of `sizes` agents (`per_host` ranks on each simulated host, None:
    one host), time `calls` call()s, stop the actors."""
    n = math.prod(sizes)
    name = "x".join(map(str, sizes))
    t0 = time.perf_counter()
    procs = _sim_mesh(agents.addresses[:n], labels, sizes, f"w7sim-{name}", per_host)
    actors = procs.spawn("echo", Echo)
    first = actors.noop.call(0).get(timeout=GET_TIMEOUT_S)
    spawn_s = time.perf_counter() - t0
    wl._check(len(first) == n, f"the first call gathered {len(first)} values, not {n}")
    noop = actors.noop
    for i in range(max(3, calls // 5)):
        noop.call(i).get(timeout=GET_TIMEOUT_S)

    controller = [threading.current_thread(), get_runtime().loop_thread]
    assert controller[1] is not None
    threads = [t for t in controller if t is not None]
    written0 = counter.snapshot()
    cpu0 = _thread_cpu_s(threads)
    samples = wl.timed_calls(noop, calls, n, timeout=GET_TIMEOUT_S)
    cpu = _thread_cpu_s(threads) - cpu0
    batches, envelopes, nbytes = (b - a for a, b in zip(written0, counter.snapshot()))
    wl._check(nbytes > 0, "the controller's transport wrote nothing that was counted: "
                          "transport.comm no longer encodes batches with encode_batch")
    actors.stop().get(timeout=GET_TIMEOUT_S)
    latency = wl._latency_summary(samples)
    return {
        "ranks": n,
        "spawn_and_first_call_s": round(spawn_s, 3),
        "p50_ms": round(latency["p50_us"] / 1000.0, 3),
        "p99_ms": round(latency["p99_us"] / 1000.0, 3),
        "calls": calls,
        "controller_cpu_us": round(cpu / calls * 1e6, 1),
        "controller_bytes": round(nbytes / calls),
        "controller_envelopes": round(envelopes / calls, 2),
        "controller_batches": round(batches / calls, 2),
    }


def _scaling(report: dict[str, Any], hosts: list[int], per_host: list[int]) -> dict[str, Any]:
    """Per H: the largest R against R = 1 (ratio near R: grows with ranks; near 1: with hosts);
    the figures per host and per rank; the latency per log2(H)."""
    keys = ("controller_cpu_us", "controller_bytes", "controller_envelopes", "p50_ms")
    low, high = min(per_host), max(per_host)
    out: dict[str, Any] = {}
    for h in hosts:
        entry: dict[str, Any] = {}
        a, b = report.get(f"hosts{h}x{low}", {}), report.get(f"hosts{h}x{high}", {})
        if high != low and "error" not in a and "error" not in b and a and b:
            entry[f"R{high}_over_R{low}"] = {k: round(b[k] / a[k], 2) for k in keys if a[k]}
        top = b if b and "error" not in b else a
        if top and "error" not in top:
            entry["per_host"] = {k: round(top[k] / h, 2) for k in keys[:3]}
            entry["per_rank"] = {k: round(top[k] / top["ranks"], 2) for k in keys[:3]}
            if h > 1:
                entry["p50_ms_per_log2_hosts"] = round(top["p50_ms"] / math.log2(h), 3)
        out[f"H{h}"] = entry
    return out


AGENT_LISTEN = {"inproc": "inproc://", "tcp": "tcp://127.0.0.1:0"}


def part_b(agents_n: int, hosts: list[int], per_host: list[int], calls: int,
           transport: str = "inproc") -> dict[str, Any]:
    needed = max([agents_n] + [h * r for h in hosts for r in per_host])
    report: dict[str, Any] = {"part": "b", "system": wl.SYSTEM, "agents": needed,
                              "agent_transport": transport}
    t0 = time.perf_counter()
    agents = Agents(needed, AGENT_LISTEN[transport])
    report["start_agents_s"] = round(time.perf_counter() - t0, 2)
    wl._log(f"W7b: {needed} agents on {transport} in {report['start_agents_s']} s")
    loop_thread = get_runtime().loop_thread
    assert loop_thread is not None
    try:
        controller = [threading.current_thread(), loop_thread]
        with WriteCounter(controller).installed() as counter:
            runs: list[tuple[str, list[str], list[int], int | None]] = [
                (f"agents{agents_n}", ["procs"], [agents_n], None)]
            runs += [(f"hosts{h}x{r}", ["hosts", "procs"], [h, r], r)
                     for h in hosts for r in per_host]
            for name, labels, sizes, r in runs:
                report[name] = wl._guarded(
                    f"W7b {name}", functools.partial(measure, agents, counter, labels, sizes,
                                                     calls, r))
    finally:
        agents.close()
    report["scaling"] = _scaling(report, hosts, per_host)
    report["cast"] = _cast_kind(report, hosts, per_host)
    return report


def _cast_kind(report: dict[str, Any], hosts: list[int], per_host: list[int]) -> str:
    """'flat' when the controller wrote one envelope per rank, 'per host' when one per host."""
    entry = report.get(f"hosts{max(hosts)}x{max(per_host)}", {})
    envelopes = entry.get("controller_envelopes")
    if not isinstance(envelopes, (int, float)) or max(per_host) == 1:
        return "unknown"
    ranks = max(hosts) * max(per_host)
    return "flat" if envelopes >= 0.9 * ranks else "per host" if envelopes <= 1.5 * max(hosts) \
        else "mixed"
