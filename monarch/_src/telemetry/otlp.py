"""OTLP/HTTP export of the metric rows, through OpenTelemetry's own exporter.

`metrics.py` opens a `Sender` when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`) is set, and gives it each export's rows. The rows are
rebuilt as the SDK's `MetricsData` (one resource per process, one scope per meter) and sent by
`OTLPMetricExporter`, which reads the rest of the standard configuration itself (headers,
timeout, compression, certificates). `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`
picks what is sent, as in the SDK: `cumulative` (the default: every series' running total at
each export), `delta` (the interval's changes), `lowmemory` (changes for counters and
histograms, totals for up-down counters).

Needs `opentelemetry-exporter-otlp-proto-http` (the `telemetry` extra); without it, metrics
still reach the SQL tables and a warning says what to install.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from monarch._src.telemetry.prometheus import Totals

__all__ = ["PREFERENCES", "Sender", "metrics_data", "open_sender"]

logger = logging.getLogger(__name__)

PREFERENCES = ("cumulative", "delta", "lowmemory")

Rows = list[tuple[str, dict[str, Any]]]


def _preference() -> str:
    raw = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "cumulative")
    value = raw.strip().lower()
    if value not in PREFERENCES:
        raise ValueError(f"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE is {raw!r}; "
                         f"set it to one of {', '.join(PREFERENCES)}.")
    return value


def _value(row: dict[str, Any], prefix: str) -> Any:
    for kind in ("f64", "i64", "u64"):
        if row.get(f"{prefix}_{kind}") is not None:
            return row[f"{prefix}_{kind}"]
    return 0


def metrics_data(rows: Rows) -> Any:
    """`rows` (metric rows of `metrics.py` or `Totals.rows()`) as the SDK's `MetricsData`."""
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        Gauge,
        Histogram,
        HistogramDataPoint,
        Metric,
        MetricsData,
        NumberDataPoint,
        ResourceMetrics,
        ScopeMetrics,
        Sum,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    # resource JSON -> scope -> (table, name) -> rows
    grouped: dict[str, dict[str, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for table, row in rows:
        scopes = grouped.setdefault(row["resource_attributes_json"], {})
        scopes.setdefault(row["scope_name"], {}).setdefault((table, row["name"]), []).append(row)
    resources = []
    for resource_json, scopes in grouped.items():
        scope_metrics = []
        for scope, by_name in scopes.items():
            found = []
            for (table, name), series in by_name.items():
                first = series[0]
                data: Any
                if table == "metric_histograms":
                    data = Histogram(
                        data_points=[HistogramDataPoint(
                            attributes=json.loads(r["attributes_json"]),
                            start_time_unix_nano=r["start_timestamp_us"] * 1000,
                            time_unix_nano=r["timestamp_us"] * 1000, count=r["count"],
                            sum=_value(r, "sum"),
                            bucket_counts=json.loads(r["bucket_counts_json"]),
                            explicit_bounds=json.loads(r["bounds_json"]),
                            min=_value(r, "min"), max=_value(r, "max")) for r in series],
                        aggregation_temporality=_temporality(first, AggregationTemporality))
                else:
                    prefix = "sum" if table == "metric_sums" else "value"
                    points = [NumberDataPoint(
                        attributes=json.loads(r["attributes_json"]),
                        start_time_unix_nano=(r["start_timestamp_us"] or r["timestamp_us"]) * 1000,
                        time_unix_nano=r["timestamp_us"] * 1000, value=_value(r, prefix))
                        for r in series]
                    data = (Gauge(data_points=points) if table == "metric_gauges" else
                            Sum(data_points=points, is_monotonic=first["is_monotonic"],
                                aggregation_temporality=_temporality(first,
                                                                     AggregationTemporality)))
                found.append(Metric(name=name, description="", unit=first["unit"], data=data))
            scope_metrics.append(ScopeMetrics(scope=InstrumentationScope(scope),
                                              metrics=found, schema_url=""))
        resources.append(ResourceMetrics(resource=Resource(json.loads(resource_json)),
                                         scope_metrics=scope_metrics, schema_url=""))
    return MetricsData(resource_metrics=resources)


def _temporality(row: dict[str, Any], kinds: Any) -> Any:
    return kinds.CUMULATIVE if row.get("temporality") == "cumulative" else kinds.DELTA


class Sender:
    """Sends each export's rows (or the running totals) to the OTLP endpoint."""

    def __init__(self, exporter: Any, preference: str) -> None:
        self.exporter = exporter  # the SDK's OTLPMetricExporter
        self.preference = preference  # one of PREFERENCES
        self.failures = 0  # exports the endpoint refused or missed in a row

    def choose(self, rows: Rows, totals: Totals) -> Rows:
        """What one export sends, by the temporality preference."""
        if self.preference == "delta":
            return rows
        cumulative = totals.rows()
        if self.preference == "cumulative":
            return cumulative

        def updown(table: str, row: dict[str, Any]) -> bool:
            return table == "metric_sums" and not row["is_monotonic"]

        return ([(t, r) for t, r in rows if not updown(t, r)]
                + [(t, r) for t, r in cumulative if updown(t, r)])

    def send(self, rows: Rows, totals: Totals) -> None:
        """Send one export (on the metrics thread; the exporter retries within its timeout)."""
        from opentelemetry.sdk.metrics.export import MetricExportResult

        chosen = self.choose(rows, totals)
        if not chosen:
            return
        result = self.exporter.export(metrics_data(chosen))
        if result is MetricExportResult.SUCCESS:
            self.failures = 0
            return
        self.failures += 1
        if self.failures == 1:  # one warning per outage, not one per second
            endpoint = (os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
                        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
            logger.warning("OTLP metrics export to %s failed; retrying at each export",
                           endpoint)

    def close(self) -> None:
        """Stop the exporter (its HTTP session)."""
        self.exporter.shutdown()


def open_sender() -> Sender | None:
    """A sender for the OTLP endpoint the environment configures; None (with a warning) when
    the OTLP exporter package is not installed."""
    preference = _preference()
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    except ImportError:
        logger.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp-proto-"
                       "http is not installed, so metrics are not exported over OTLP; install "
                       "monarch's 'telemetry' extra.")
        return None
    return Sender(OTLPMetricExporter(), preference)
