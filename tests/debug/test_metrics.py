"""Metrics (`monarch._src.telemetry.metrics`): the rows a process's instruments become, read back
from the telemetry sink's real Unix socket; the runtime's built-in instruments; the OpenTelemetry
API wrappers of `monarch._src.actor.telemetry`; OTLP export to a real HTTP receiver."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from monarch._src.telemetry import metrics, record

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0

Row = tuple[str, dict[str, Any]]


class Collector:
    """A stand-in for the host collector: a Unix socket server that decodes the sink's frames."""

    def __init__(self) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="mx"), "t.sock")
        self.rows: list[Row] = []
        self._cond = threading.Condition()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed at the end of the test
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        buffer = bytearray()
        with conn:
            while chunk := conn.recv(65536):
                buffer += chunk
                rows = record.decode_frames(buffer)
                with self._cond:
                    self.rows.extend((table, row) for table, row in rows)
                    self._cond.notify_all()

    def wait_for(self, found: Callable[[list[Row]], bool]) -> list[Row]:
        """Send what the sink holds, then wait until `found(rows)` holds."""
        assert record.SINK is not None
        record.SINK.flush()
        with self._cond:
            assert self._cond.wait_for(lambda: found(self.rows), WAIT_S), self.rows
            return list(self.rows)

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    """Metrics on in this process, their rows sent to a collector of the test's own."""
    col = Collector()
    record.install(col.path)
    metrics.start("metrics-test", export_s=3600)  # exports only when the test flushes
    try:
        yield col
    finally:
        metrics.stop()
        record.uninstall()
        col.close()


def _named(rows: list[Row], name: str) -> list[Row]:
    return [(t, r) for t, r in rows if r.get("name") == name]


def test_metrics_custom_counter_one_metric_sums_row_with_schema_columns(
        collector: Collector) -> None:
    requests = metrics.get_meter().create_counter("example.requests")
    requests.add(1, {"operation": "predict", "outcome": "success"})
    metrics.flush()
    rows = collector.wait_for(lambda rows: bool(_named(rows, "example.requests")))
    [(table, row)] = _named(rows, "example.requests")
    assert table == "metric_sums"
    assert set(row) == {name for name, _ in record.SCHEMAS["metric_sums"]}
    assert row["scope_name"] == "monarch"
    assert (row["sum_u64"], row["sum_i64"], row["sum_f64"]) == (1, None, None)
    assert (row["temporality"], row["is_monotonic"]) == ("delta", True)
    assert json.loads(row["attributes_json"]) == {"operation": "predict", "outcome": "success"}
    resource = json.loads(row["resource_attributes_json"])
    assert resource["service.name"] == "metrics-test"
    assert resource["telemetry.sdk.name"] == "opentelemetry"
    assert len(resource["service.instance.id"]) == 32  # one per process
    assert row["start_timestamp_us"] <= row["timestamp_us"]


def test_metrics_delta_rows_carry_only_the_interval(collector: Collector) -> None:
    hits = metrics.get_meter().create_counter("delta.hits")
    hits.add(2)
    first = _named(metrics.flush(), "delta.hits")
    assert metrics.flush() == []  # nothing measured since: no rows
    hits.add(3)
    hits.add(4)
    second = _named(metrics.flush(), "delta.hits")
    assert [r["sum_u64"] for _, r in first + second] == [2, 7]
    assert second[0][1]["start_timestamp_us"] >= first[0][1]["timestamp_us"]
    rows = collector.wait_for(lambda rows: len(_named(rows, "delta.hits")) == 2)
    assert [r["sum_u64"] for _, r in _named(rows, "delta.hits")] == [2, 7]


def test_metrics_every_table_has_its_schema_columns(collector: Collector) -> None:
    meter = metrics.get_meter("schema.check")
    meter.create_up_down_counter("s.depth").add(-2)
    meter.create_histogram("s.latency").record(7.5, {"k": 1})
    meter.create_gauge("s.temp").set(21.5)
    tables = {table: row for table, row in metrics.flush()}
    for table, row in tables.items():
        assert set(row) == {name for name, _ in record.SCHEMAS[table]}, table
    assert (tables["metric_sums"]["sum_i64"], tables["metric_sums"]["is_monotonic"]) == (-2, False)
    hist = tables["metric_histograms"]
    assert (hist["count"], hist["sum_f64"], hist["min_f64"], hist["max_f64"]) == (1, 7.5, 7.5, 7.5)
    assert json.loads(hist["bounds_json"]) == list(metrics.DEFAULT_BOUNDS)
    assert json.loads(hist["bucket_counts_json"])[2] == 1  # (5, 10]
    assert json.loads(hist["attributes_json"]) == {"k": "1"}
    assert tables["metric_gauges"]["value_f64"] == 21.5


def test_metrics_histogram_bucket_edges_are_upper_inclusive(collector: Collector) -> None:
    hist = metrics.get_meter().create_histogram(
        "edges", explicit_bucket_boundaries_advisory=[1.0, 2.0])
    for value in (0.5, 1.0, 1.5, 2.0, 9.0):
        hist.record(value)
    [(_, row)] = _named(metrics.flush(), "edges")
    assert json.loads(row["bucket_counts_json"]) == [2, 2, 1]
    assert (row["count"], row["min_f64"], row["max_f64"]) == (5, 0.5, 9.0)


def test_metrics_builtin_instruments_use_monarchs_names_and_attributes(
        collector: Collector) -> None:
    metrics.message_posted("client.c@x", "worker.p@y")
    metrics.message_posted("client.c@x", "worker.p@y")
    metrics.message_queued("worker.p@y")
    metrics.message_queued("worker.p@y")
    metrics.message_dequeued("worker.p@y")
    metrics.handler_done("worker.p@y", "ping", 0.003, ok=True)
    metrics.handler_done("worker.p@y", "ping", 0.5, ok=False)
    metrics.actor_failed("worker.p@y")
    metrics.proc_failed("proc.1")
    rows = {r["name"]: (t, r) for t, r in metrics.flush()}
    table, posts = rows["mailbox.posts"]
    assert table == "metric_sums" and posts["sum_u64"] == 2 and posts["is_monotonic"]
    assert json.loads(posts["attributes_json"]) == {"actor_id": "client.c@x",
                                                    "dest_actor_id": "worker.p@y"}
    assert rows["actor.message_queue_size"][1]["sum_i64"] == 1
    assert not rows["actor.message_queue_size"][1]["is_monotonic"]
    assert rows["actor.messages_received"][1]["sum_u64"] == 2
    assert rows["actor.message_handler_errors"][1]["sum_u64"] == 1
    table, handler = rows["actor.message_handler_duration.ns"]
    assert table == "metric_histograms" and handler["unit"] == "ns"
    assert (handler["count"], handler["min_u64"], handler["max_u64"]) == (2, 3_000_000,
                                                                         500_000_000)
    assert json.loads(handler["attributes_json"]) == {"actor_id": "worker.p@y",
                                                      "endpoint": "ping"}
    assert rows["proc_mesh.actor_failures"][1]["sum_u64"] == 1
    assert json.loads(rows["proc_mesh.proc_failures"][1]["attributes_json"]) == {
        "proc_id": "proc.1"}
    assert {r["scope_name"] for _, r in rows.values()} == {metrics.RUNTIME_SCOPE}


def test_metrics_observable_counter_reports_changes_and_gauge_values(
        collector: Collector) -> None:
    total = {"value": 5}
    meter = metrics.get_meter("observed")

    def read_total(options: Any) -> list[Any]:
        return [_Observation(total["value"], {"disk": "a"})]

    meter.create_observable_counter("obs.bytes", [read_total])
    meter.create_observable_gauge("obs.temp", [lambda options: [_Observation(3.5, None)]])
    first = {r["name"]: r for _, r in metrics.flush()}
    assert first["obs.bytes"]["sum_u64"] == 5 and first["obs.temp"]["value_f64"] == 3.5
    second = {r["name"]: r for _, r in metrics.flush()}
    assert "obs.bytes" not in second  # unchanged: no row
    total["value"] = 12
    third = {r["name"]: r for _, r in metrics.flush()}
    assert third["obs.bytes"]["sum_u64"] == 7


class _Observation:
    def __init__(self, value: float, attributes: dict[str, Any] | None) -> None:
        self.value = value
        self.attributes = attributes


def test_metrics_off_drops_measurements_but_still_checks_arguments() -> None:
    assert not metrics.running()
    counter = metrics.get_meter().create_counter("off.counter")
    counter.add(1)
    metrics.message_posted("a", "b")
    assert metrics.flush() == [] and metrics.prometheus_text() == ""
    with pytest.raises(ValueError, match="Counter 'off.counter' only goes up"):
        counter.add(-1)
    with pytest.raises(TypeError, match="Instrument 'off.counter' records numbers, got str"):
        counter.add("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes its attributes as a dict"):
        counter.add(1, [("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strictly increasing bucket bounds"):
        metrics.get_meter().create_histogram("off.h", explicit_bucket_boundaries_advisory=[2, 1])
    with pytest.raises(ValueError, match="export_s=...\\) needs a positive number"):
        metrics.start("x", export_s=0)
    assert not metrics.running()


def test_metrics_same_name_gives_the_same_instrument() -> None:
    meter = metrics.get_meter("twice")
    assert meter.create_counter("c") is meter.create_counter("c")
    assert metrics.get_meter("twice") is meter


def test_metrics_actor_telemetry_wrappers_feed_the_registry(collector: Collector) -> None:
    from monarch._src.actor import telemetry

    counter = telemetry.get_meter().create_counter("wrapped.calls")
    assert isinstance(counter, telemetry.Counter)
    counter.add(2.9, {"rank": 3})
    telemetry.Meter("wrapped").create_histogram("wrapped.h").record(1.5)
    telemetry.get_meter().create_up_down_counter("wrapped.depth").add(-1)
    rows = {r["name"]: r for _, r in metrics.flush()}
    assert rows["wrapped.calls"]["sum_u64"] == 2  # an integer, as on Monarch
    assert json.loads(rows["wrapped.calls"]["attributes_json"]) == {"rank": "3"}
    assert rows["wrapped.h"]["scope_name"] == "wrapped"
    assert rows["wrapped.depth"]["sum_i64"] == -1
    assert telemetry.get_monarch_tracer() is telemetry.get_monarch_tracer()


# A fresh interpreter: OpenTelemetry allows one global meter provider per process.
_INSTALL_SCRIPT = r"""
import json
import opentelemetry.metrics as otel_metrics
from monarch._src.actor import telemetry
from monarch._src.telemetry import metrics
telemetry.install()
telemetry.install()
metrics.start("installed", export_s=3600)
otel_metrics.get_meter("third.party").create_counter("global.calls").add(4, {"x": 1})
print(json.dumps([r for _, r in metrics.flush()]))
metrics.stop()
"""


def test_metrics_install_routes_opentelemetry_global_meters_here() -> None:
    out = subprocess.run([sys.executable, "-c", _INSTALL_SCRIPT], cwd=REPO, check=True,
                         capture_output=True, text=True, timeout=50).stdout
    [row] = json.loads(out.strip().splitlines()[-1])
    assert (row["name"], row["scope_name"], row["sum_u64"]) == ("global.calls", "third.party", 4)


class _OtlpReceiver:
    """A tiny OTLP/HTTP receiver: decodes each POST /v1/metrics body."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )

        self.requests: list[Any] = []
        cond = self.cond = threading.Condition()
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = ExportMetricsServiceRequest()
                message.ParseFromString(body)
                with cond:
                    requests.append((self.path, message))
                    cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def points(self, name: str) -> list[tuple[str, Any, Any]]:
        """(path, metric, resource) for every metric `name` received."""
        found = []
        with self.cond:
            for path, message in self.requests:
                for rm in message.resource_metrics:
                    for sm in rm.scope_metrics:
                        found += [(path, m, rm.resource) for m in sm.metrics if m.name == name]
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[_OtlpReceiver]:
    receiver = _OtlpReceiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    try:
        yield receiver
    finally:
        metrics.stop()
        receiver.close()


def test_metrics_otlp_export_sends_cumulative_totals_by_default(otlp: _OtlpReceiver) -> None:
    metrics.start("otlp-test", export_s=3600)
    counter = metrics.get_meter().create_counter("otlp.requests")
    counter.add(2, {"route": "a"})
    metrics.get_meter().create_histogram("otlp.latency").record(12.0)
    metrics.flush()
    counter.add(3, {"route": "a"})
    metrics.flush()
    sums = otlp.points("otlp.requests")
    assert [path for path, _, _ in sums] == ["/v1/metrics", "/v1/metrics"]
    values = [m.sum.data_points[0].as_int for _, m, _ in sums]
    assert values == [2, 5]
    last = sums[-1][1].sum
    assert last.is_monotonic and last.aggregation_temporality == 2  # CUMULATIVE
    assert {kv.key: kv.value.string_value for kv in last.data_points[0].attributes} == {
        "route": "a"}
    resource = {kv.key: kv.value.string_value for kv in sums[-1][2].attributes}
    assert resource["service.name"] == "otlp-test"
    [(_, hist, _), *_] = otlp.points("otlp.latency")
    assert hist.histogram.data_points[0].count == 1
    assert hist.histogram.data_points[0].sum == 12.0


def test_metrics_otlp_delta_preference_sends_changes(otlp: _OtlpReceiver,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
    metrics.start("otlp-delta", export_s=3600)
    counter = metrics.get_meter().create_counter("otlp.delta")
    counter.add(2)
    metrics.flush()
    counter.add(3)
    metrics.flush()
    points = [m.sum for _, m, _ in otlp.points("otlp.delta")]
    assert [p.data_points[0].as_int for p in points] == [2, 3]
    assert {p.aggregation_temporality for p in points} == {1}  # DELTA


def test_metrics_otlp_bad_temporality_preference_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes")
    with pytest.raises(ValueError, match="TEMPORALITY_PREFERENCE is 'sometimes'"):
        metrics.start("bad-pref")
    assert not metrics.running()


# A fresh interpreter that forks (as a zygote forks procs) while its metrics are on.
_FORK_SCRIPT = r"""
import json, os
from monarch._src.telemetry import metrics
metrics.start("parent", export_s=3600)
hits = metrics.get_meter().create_counter("fork.hits")
hits.add(5)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    was_running = metrics.running()
    metrics.start("child", export_s=3600)
    hits.add(2)
    rows = [r for _, r in metrics.flush()]
    os.write(write, json.dumps([was_running, rows]).encode())
    os._exit(0)
os.close(write)
with os.fdopen(read) as pipe:
    child = json.loads(pipe.read())
os.waitpid(pid, 0)
print(json.dumps({"child": child, "parent": [r for _, r in metrics.flush()]}))
"""


def test_metrics_forked_child_starts_off_and_exports_its_own() -> None:
    out = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], cwd=REPO, check=True,
                         capture_output=True, text=True, timeout=50).stdout
    result = json.loads(out.strip().splitlines()[-1])
    was_running, child_rows = result["child"]
    assert not was_running
    [child] = child_rows
    resource = json.loads(child["resource_attributes_json"])
    assert (child["sum_u64"], resource["service.name"]) == (2, "child")
    [parent] = result["parent"]
    assert parent["sum_u64"] == 5
