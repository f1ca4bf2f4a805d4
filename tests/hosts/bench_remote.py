"""Benchmark: remote hosts over loopback `monarch worker` processes versus `this_host()`.

Prints numbers, asserts nothing. Run from the repo root:

    .venv/bin/python -m tests.hosts.bench_remote
"""

from __future__ import annotations

import statistics
import time

from monarch.actor import Actor, attach_to_workers, endpoint, this_host
from tests.hosts.conftest import Workers


class Echo(Actor):
    @endpoint
    def echo(self, x: int) -> int:
        return x


def _say(label: str, value: float, unit: str) -> None:
    print(f"{label + ':':44s}{value:9.1f} {unit}")


def _latency_us(mesh: Echo, n: int = 500) -> float:
    for i in range(50):
        mesh.echo.call_one(i).get(timeout=30)
    samples = []
    for i in range(n):
        t = time.perf_counter()
        mesh.echo.call_one(i).get(timeout=30)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e6


def main() -> None:
    local = this_host().spawn_procs().spawn("local", Echo)
    _say("call_one median, proc on this_host()", _latency_us(local), "us")
    t = time.perf_counter()
    workers = Workers(["127.0.0.2", "127.0.0.3"])
    _say("start 2 `monarch worker` processes", (time.perf_counter() - t) * 1e3, "ms")
    try:
        t = time.perf_counter()
        hosts = attach_to_workers(ca="trust_all_connections", workers=workers.addresses)
        hosts.initialized.get(timeout=30)
        _say("attach_to_workers + initialized (2 hosts)", (time.perf_counter() - t) * 1e3, "ms")
        t = time.perf_counter()
        procs = hosts.spawn_procs(per_host={"gpus": 2})
        mesh = procs.spawn("remote", Echo)
        mesh.echo.call(0).get(timeout=30)
        _say("spawn_procs 2x2 + spawn + first call (cold)", (time.perf_counter() - t) * 1e3, "ms")
        t = time.perf_counter()
        again = hosts.spawn_procs(per_host={"gpus": 2})
        again.spawn("again", Echo).echo.call(0).get(timeout=30)
        _say("the same, hosts warm (second spawn_procs)", (time.perf_counter() - t) * 1e3, "ms")
        again.stop().get(timeout=30)
        one = mesh.slice(hosts=1, gpus=1)
        _say("call_one median, proc on a remote host", _latency_us(one), "us")
        t = time.perf_counter()
        procs.stop().get(timeout=30)
        _say("ProcMesh.stop (4 remote procs)", (time.perf_counter() - t) * 1e3, "ms")
        t = time.perf_counter()
        hosts.shutdown().get(timeout=30)
        _say("HostMesh.shutdown (2 hosts)", (time.perf_counter() - t) * 1e3, "ms")
    finally:
        workers.close()


if __name__ == "__main__":
    main()
