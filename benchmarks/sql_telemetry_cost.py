"""Call-path cost of a job's SQL telemetry: `call_one` round trips to one actor of a
`ProcessJob({"hosts": 1})`, with telemetry off and on, in one run.

    .venv/bin/python benchmarks/sql_telemetry_cost.py [--calls N] [--repeats R]

Prints one JSON object: per mode, the median over repeats of the p50 and p99 round trip (µs),
the ratio on/off, and the load average before and after. To check that telemetry *off* costs
nothing against a commit without it, run this script from that commit's tree too (same
machine, back to back) and compare the "off" figures. The load is `_report`'s
`load_avg_1m_before`/`load_avg_1m_after` (reports before it named the same 1-minute averages
`load_before`/`load_after`). The percentiles are `_report.percentile`'s nearest rank (before it,
the value just above the rank when q times the sample count was a whole number).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from _report import load_after, load_before, percentile

from monarch.actor import Actor, endpoint
from monarch.job import ProcessJob


class Echo(Actor):
    @endpoint
    def echo(self, x: int) -> int:
        return x


def _measure(telemetry: bool, calls: int, repeats: int) -> dict[str, float]:
    job = ProcessJob({"hosts": 1})
    if telemetry:
        from monarch.job import TelemetryConfig

        job.enable_telemetry(TelemetryConfig(dashboard_port=0, snapshot_interval_secs=0))
    state = job.state(cached_path=None)
    try:
        actor = state.hosts.spawn_procs(name="bench").spawn("echo", Echo)
        actor.initialized.get()
        for i in range(200):  # warm up
            actor.echo.call_one(i).get()
        p50s, p99s = [], []
        for _ in range(repeats):
            times = []
            for i in range(calls):
                start = time.perf_counter()
                actor.echo.call_one(i).get()
                times.append((time.perf_counter() - start) * 1e6)
            p50s.append(percentile(times, 0.5))
            p99s.append(percentile(times, 0.99))
        return {"p50_us": round(statistics.median(p50s), 1),
                "p99_us": round(statistics.median(p99s), 1)}
    finally:
        job.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    report: dict[str, Any] = {"benchmark": "sql_telemetry_cost", "calls": args.calls,
                              "repeats": args.repeats, **load_before()}
    try:
        import monarch._src.job.telemetry_config  # noqa: F401
        modes = {"off": False, "on": True}
    except ImportError:  # a tree from before SQL telemetry: only "off" exists there
        modes = {"off": False}
    for name, on in modes.items():
        report[name] = _measure(on, args.calls, args.repeats)
    if "on" in report:
        report["on_over_off_p50"] = round(report["on"]["p50_us"] / report["off"]["p50_us"], 3)
    report.update(load_after())
    print(json.dumps(report))


if __name__ == "__main__":
    main()
