"""Per-call cost of monarch's telemetry entry points, with and without OpenTelemetry.

Prints one JSON object: nanoseconds per call (median of repeats) for a bare function call and
for the same call through `traced`, inside `span`, and through the gate endpoint dispatch reads
(`OTEL and tracing_active()`), first with the OpenTelemetry path switched off (what a user
without `opentelemetry` installed gets) and then, when the package is installed, through its API
with no tracer provider installed and with an SDK provider that records to memory.

    .venv/bin/python benchmarks/telemetry_overhead.py [--calls N] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from _report import load_after, load_before

from monarch._src.mesh import telemetry


def _per_call_ns(loop: Callable[[int], Any], calls: int, repeats: int) -> float:
    loop(calls)  # warm up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        loop(calls)
        samples.append((time.perf_counter_ns() - start) / calls)
    return round(statistics.median(samples), 1)


def _noop(x: int) -> int:
    return x


def _suite(calls: int, repeats: int) -> dict[str, float]:
    traced = telemetry.traced(_noop)
    span = telemetry.span

    def bare(n: int) -> None:
        for _ in range(n):
            _noop(1)

    def through_traced(n: int) -> None:
        for _ in range(n):
            traced(1)

    def in_span(n: int) -> None:
        for _ in range(n):
            with span("s"):
                _noop(1)

    def gate(n: int) -> None:  # what HostedActor._call reads before each endpoint call
        for _ in range(n):
            if telemetry.OTEL and telemetry.tracing_active():
                pass

    return {
        "bare_call_ns": _per_call_ns(bare, calls, repeats),
        "traced_call_ns": _per_call_ns(through_traced, calls, repeats),
        "span_block_ns": _per_call_ns(in_span, calls, repeats),
        "dispatch_gate_ns": _per_call_ns(gate, calls, repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    available = telemetry.OTEL
    report: dict[str, Any] = {"otel_installed": available, **load_before()}
    telemetry.OTEL = False
    report["without_otel"] = _suite(args.calls, args.repeats)
    if available:
        telemetry.OTEL = True
        report["otel_no_provider"] = _suite(args.calls, args.repeats)
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )
        except ImportError:
            pass
        else:
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            telemetry._tracer = None
            report["otel_sdk_in_memory"] = _suite(args.calls // 100, args.repeats)
    base = report["without_otel"]["bare_call_ns"]
    report["without_otel_overhead_ns"] = {
        k: round(v - base, 1) for k, v in report["without_otel"].items() if k != "bare_call_ns"}
    report.update(load_after())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
