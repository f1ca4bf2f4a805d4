"""Remote hosts over loopback `monarch worker` processes, against `this_host()` in the same run.

Prints one JSON report; asserts nothing. Run from the repository root:

    .venv/bin/python benchmarks/remote_hosts.py [--calls N]

Figures: `call_one` median latency to a proc on this host and to a proc on an attached host
(and their ratio), starting two workers, attaching, a cold and a warm 2x2 `spawn_procs` up to
the first answer, and stopping procs / shutting the hosts down.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from _report import load_after, load_before

from monarch._src.hosts.local_workers import LocalWorkers
from monarch.actor import Actor, attach_to_workers, endpoint, this_host


class Echo(Actor):
    @endpoint
    def echo(self, x: int) -> int:
        return x


def _latency_us(mesh: Any, n: int) -> float:
    for i in range(50):
        mesh.echo.call_one(i).get(timeout=30)
    samples = []
    for i in range(n):
        t = time.perf_counter()
        mesh.echo.call_one(i).get(timeout=30)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e6


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1e3, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="call_one samples per target")
    args = parser.parse_args()
    report: dict[str, Any] = {"workload": "remote hosts (2 loopback monarch workers)",
                              **load_before()}
    local = this_host().spawn_procs().spawn("local", Echo)
    report["call_one_p50_us_this_host"] = round(_latency_us(local, args.calls), 1)
    t = time.perf_counter()
    workers = LocalWorkers(2)
    try:
        addresses = [f.result(timeout=60) for f in workers.futures()]
        report["start_2_workers_ms"] = _ms(t)
        t = time.perf_counter()
        hosts = attach_to_workers(ca="trust_all_connections", workers=addresses)
        hosts.initialized.get(timeout=30)
        report["attach_2_hosts_ms"] = _ms(t)
        t = time.perf_counter()
        procs = hosts.spawn_procs(per_host={"gpus": 2})
        mesh = procs.spawn("remote", Echo)
        mesh.echo.call(0).get(timeout=60)
        report["spawn_2x2_first_call_cold_ms"] = _ms(t)
        t = time.perf_counter()
        again = hosts.spawn_procs(per_host={"gpus": 2})
        again.spawn("again", Echo).echo.call(0).get(timeout=60)
        report["spawn_2x2_first_call_warm_ms"] = _ms(t)
        again.stop().get(timeout=30)
        remote_us = _latency_us(mesh.slice(hosts=1, gpus=1), args.calls)
        report["call_one_p50_us_remote_host"] = round(remote_us, 1)
        report["remote_vs_this_host"] = round(remote_us / report["call_one_p50_us_this_host"], 2)
        t = time.perf_counter()
        procs.stop().get(timeout=30)
        report["stop_4_remote_procs_ms"] = _ms(t)
        t = time.perf_counter()
        hosts.shutdown().get(timeout=30)
        report["shutdown_2_hosts_ms"] = _ms(t)
    finally:
        workers.close()
    report.update(load_after())
    print(json.dumps(report, indent=1), flush=True)


if __name__ == "__main__":
    main()
