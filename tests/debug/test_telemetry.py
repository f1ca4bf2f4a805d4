"""`traced`, `span`, `get_meter`: free without OpenTelemetry, real spans with it, and spans
around endpoint calls in procs whose application installed a tracer provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monarch._src.mesh import telemetry
from tests.debug.actors import Traced

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]


def _double(x: int) -> int:
    return 2 * x


def test_traced_without_otel_returns_function_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "OTEL", False)
    assert telemetry.traced(_double) is _double
    assert telemetry.traced(name="x")(_double) is _double
    with telemetry.span("a") as s1, telemetry.span("b") as s2:
        assert s1 is s2  # the one shared empty context manager
    meter = telemetry.get_meter("m")
    counter = meter.create_counter("c")
    counter.add(1)
    meter.create_histogram("h").record(2.0)


def test_traced_rejects_non_callable() -> None:
    with pytest.raises(TypeError, match="traced\\(\\) decorates a function, got int"):
        telemetry.traced(3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="span\\(\\) needs a name string, got int"):
        telemetry.span(3)  # type: ignore[arg-type]


# Runs in a fresh interpreter: OpenTelemetry lets a process set its tracer provider only once,
# and a provider left in the test process would trace every later test's controller actors.
_OTEL_SCRIPT = r"""
import asyncio, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from monarch._src.mesh import telemetry

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
assert not telemetry.tracing_active()
trace.set_tracer_provider(provider)
assert telemetry.tracing_active()

@telemetry.traced
def add(a, b):
    return a + b

@telemetry.traced(name="custom")
async def later(x):
    with telemetry.span("child", {"k": 1}):
        return x

try:
    with telemetry.span("failing"):
        raise KeyError("x")
except KeyError:
    pass
out = {"results": [add(1, 2), asyncio.run(later(4))], "spans": {}}
for s in exporter.get_finished_spans():
    out["spans"][s.name] = {"id": s.context.span_id,
                            "parent": None if s.parent is None else s.parent.span_id,
                            "attributes": dict(s.attributes or {}),
                            "status": s.status.status_code.name,
                            "events": [e.name for e in s.events]}
print(json.dumps(out))
"""


def test_traced_and_span_with_otel_record_spans() -> None:
    pytest.importorskip("opentelemetry.sdk")
    if not telemetry.OTEL:
        pytest.skip("OpenTelemetry is switched off")
    done = subprocess.run([sys.executable, "-c", _OTEL_SCRIPT], capture_output=True, text=True,
                          timeout=60, cwd=REPO, env={**os.environ, "MONARCH_PRESTART": "0"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["results"] == [3, 4]
    spans = out["spans"]
    assert set(spans) == {"add", "custom", "child", "failing"}
    assert spans["child"]["parent"] == spans["custom"]["id"]
    assert spans["child"]["attributes"] == {"monarch.actor": "<root>", "k": 1}
    assert spans["failing"]["status"] == "ERROR" and "exception" in spans["failing"]["events"]


def test_get_meter_with_otel_is_an_otel_meter() -> None:
    if not telemetry.OTEL:
        pytest.skip("OpenTelemetry is switched off")
    meter = telemetry.get_meter("monarch.test")
    assert type(meter).__module__.startswith("opentelemetry")
    meter.create_counter("calls").add(1, {"a": "b"})


def test_endpoint_calls_get_spans_in_procs_with_a_provider() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from monarch.actor import this_host

    # Own procs: the actor installs a tracer provider for the rest of its proc's life.
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        mesh = procs.spawn("traced", Traced)
        assert mesh.work.call(5).get(timeout=30).item(gpus=0) == 6
        spans = mesh.slice(gpus=1).spans.call_one().get(timeout=30)
    finally:
        procs.stop().get(timeout=30)
    by_name = {s["name"]: s for s in spans}
    assert "traced.work" in by_name and "inner" in by_name
    work = by_name["traced.work"]
    assert work["attributes"] == {"monarch.mesh": "traced", "monarch.endpoint": "work",
                                  "monarch.rank": 1}
    assert by_name["inner"]["parent"] == work["id"]  # the user's span nests under the endpoint's
    assert by_name["inner"]["attributes"]["n"] == 5


def test_tracing_active_off_until_a_provider_is_installed() -> None:
    import sys

    trace = sys.modules.get("opentelemetry.trace")
    expected = trace is not None and getattr(trace, "_TRACER_PROVIDER", None) is not None
    assert telemetry.tracing_active() is expected
