"""Prometheus text (`monarch._src.telemetry.prometheus`): running totals of metric rows, the
text format, and a real Prometheus (Debian's package) scraping a process's `/metrics`."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.telemetry import metrics
from monarch._src.telemetry.prometheus import CONTENT_TYPE, Totals, serve_text
from tests.prometheus_server import poll, prometheus_scraping

pytestmark = pytest.mark.timeout(60)

RESOURCE = json.dumps({"service.name": "svc"})


def _sum(name: str, value: int, attrs: dict[str, str], monotonic: bool = True,
         resource: str = RESOURCE) -> dict[str, Any]:
    return {"name": name, "timestamp_us": 2, "start_timestamp_us": 1, "scope_name": "monarch",
            "unit": "", "temporality": "delta", "is_monotonic": monotonic,
            "attributes_json": json.dumps(attrs), "resource_attributes_json": resource,
            "sum_f64": None, "sum_i64": None if monotonic else value,
            "sum_u64": value if monotonic else None}


def _hist(name: str, values: list[float], bounds: list[float]) -> dict[str, Any]:
    counts = [0] * (len(bounds) + 1)
    for value in values:
        counts[sum(1 for b in bounds if value > b)] += 1
    return {"name": name, "timestamp_us": 2, "start_timestamp_us": 1, "scope_name": "monarch",
            "unit": "", "temporality": "delta", "attributes_json": "{}",
            "resource_attributes_json": RESOURCE, "count": len(values),
            "sum_f64": float(sum(values)), "sum_i64": None, "sum_u64": None,
            "min_f64": min(values), "min_i64": None, "min_u64": None, "max_f64": max(values),
            "max_i64": None, "max_u64": None, "bounds_json": json.dumps(bounds),
            "bucket_counts_json": json.dumps(counts)}


def test_totals_add_up_delta_sums_and_histograms() -> None:
    totals = Totals()
    totals.fold("metric_sums", _sum("a.b", 2, {"k": "v"}))
    totals.fold("metric_sums", _sum("a.b", 3, {"k": "v"}))
    totals.fold("metric_sums", _sum("a.b", 1, {"k": "w"}))
    totals.fold("metric_sums", _sum("depth", 4, {}, monotonic=False))
    totals.fold("metric_sums", _sum("depth", -3, {}, monotonic=False))
    totals.fold("metric_histograms", _hist("lat", [1.0, 7.0], [5.0]))
    totals.fold("metric_histograms", _hist("lat", [9.0], [5.0]))
    totals.fold("spans", {"name": "ignored"})
    text = totals.text()
    assert "# TYPE a_b_total counter" in text
    assert 'a_b_total{k="v",otel_scope_name="monarch",service_name="svc"} 5' in text
    assert 'a_b_total{k="w",otel_scope_name="monarch",service_name="svc"} 1' in text
    assert "# TYPE depth gauge" in text and "depth{" in text and "} 1\n" in text
    assert 'lat_bucket{le="5.0",otel_scope_name="monarch",service_name="svc"} 1' in text
    assert 'lat_bucket{le="+Inf",otel_scope_name="monarch",service_name="svc"} 3' in text
    assert 'lat_sum{otel_scope_name="monarch",service_name="svc"} 17.0' in text
    assert 'lat_count{otel_scope_name="monarch",service_name="svc"} 3' in text
    [(_, hist)] = [(t, r) for t, r in totals.rows() if r["name"] == "lat"]
    assert (hist["min_f64"], hist["max_f64"], hist["temporality"]) == (1.0, 9.0, "cumulative")


def test_totals_keep_processes_apart_by_service_and_escape_labels() -> None:
    totals = Totals()
    other = json.dumps({"service.name": "worker-1"})
    totals.fold("metric_sums", _sum("hits", 1, {"path": 'a"b\\c\nd', "9bad.key": "x"}))
    totals.fold("metric_sums", _sum("hits", 4, {"path": 'a"b\\c\nd', "9bad.key": "x"},
                                    resource=other))
    lines = [line for line in totals.text().splitlines() if line.startswith("hits_total{")]
    assert lines == [
        'hits_total{_9bad_key="x",otel_scope_name="monarch",path="a\\"b\\\\c\\nd",'
        'service_name="svc"} 1',
        'hits_total{_9bad_key="x",otel_scope_name="monarch",path="a\\"b\\\\c\\nd",'
        'service_name="worker-1"} 4']


def test_serve_text_answers_metrics_and_404_elsewhere() -> None:
    url, stop = serve_text(lambda: "x_total 1\n")
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.headers["Content-Type"] == CONTENT_TYPE
            assert resp.read() == b"x_total 1\n"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
        assert err.value.code == 404
        err.value.close()
    finally:
        stop()
        stop()  # idempotent


@pytest.fixture
def prometheus_server() -> Iterator[Any]:
    """Metrics on in this process, served at /metrics; a real Prometheus scraping it every
    second; yields a function querying Prometheus' HTTP API."""
    metrics.start("prom-test", export_s=3600)
    url, stop = metrics.serve_prometheus("127.0.0.1", 0)
    try:
        with prometheus_scraping(url) as query:
            yield query
    finally:
        stop()
        metrics.stop()


@pytest.mark.slow
def test_real_prometheus_scrapes_counters_histograms_and_builtins(
        prometheus_server: Any) -> None:
    query = prometheus_server
    metrics.get_meter().create_counter("example.requests").add(
        3, {"operation": "predict", "outcome": "success"})
    metrics.get_meter().create_histogram("example.latency").record(42.0)
    metrics.message_posted("client.c@x", "worker.p@y")
    deadline = time.monotonic() + 40
    [series] = poll(query, 'example_requests_total{operation="predict"}', deadline)
    assert series["metric"]["outcome"] == "success"
    assert series["metric"]["service_name"] == "prom-test"
    assert series["metric"]["job"] == "monarch"
    assert len(series["metric"]["service_instance_id"]) == 32
    assert series["value"][1] == "3"
    [count] = poll(query, "example_latency_count", deadline)
    assert count["value"][1] == "1"
    [bucket] = poll(query, 'example_latency_bucket{le="50.0"}', deadline)
    assert bucket["value"][1] == "1"
    [posts] = poll(query, "mailbox_posts_total", deadline)
    assert posts["metric"]["dest_actor_id"] == "worker.p@y"
