"""Running totals of metric rows, as Prometheus' text exposition format and over HTTP.

`Totals.fold(table, row)` takes `metric_sums` / `metric_gauges` / `metric_histograms` rows
(delta or cumulative, as `metrics.py` exports them and the host collector receives them) and
keeps one cumulative series per (name, scope, attributes, resource): sums and histograms add
up, gauges keep the last value. `text()` writes them in Prometheus' text format (version
0.0.4): monotonic sums are counters named `<name>_total`, other sums and gauges are gauges,
histograms have cumulative `_bucket{le=...}`, `_sum` and `_count`. A name's characters outside
`[a-zA-Z0-9_:]` become `_` (`mailbox.posts` is `mailbox_posts_total`); the labels are the
series' attributes plus `otel_scope_name`, `service_name` and `service_instance_id` (the
resource's `service.name` and `service.instance.id`: one process), as OpenTelemetry's Prometheus
mapping names them.

`serve_text(source, host, port)` serves `source()` at `/metrics` from a thread; any process
holding totals (one proc, the host collector, the controller) can mount it.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CONTENT_TYPE", "METRIC_TABLES", "Totals", "serve_text"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METRIC_TABLES = frozenset({"metric_sums", "metric_gauges", "metric_histograms"})
_VALUE_COLUMNS = {"metric_sums": ("sum_f64", "sum_i64", "sum_u64"),
                  "metric_gauges": ("value_f64", "value_i64", "value_u64")}

SeriesKey = tuple[str, str, str, str, str]  # table, name, scope, attributes, resource (JSON)


def _add(a: Any, b: Any) -> Any:
    return b if a is None else a + b


class Totals:
    """Cumulative series built from metric rows (see the module doc); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[SeriesKey, dict[str, Any]] = {}  # key -> its cumulative row

    def fold(self, table: str, row: dict[str, Any]) -> None:
        """Add one row (rows of other tables are ignored)."""
        if table not in METRIC_TABLES:
            return
        key = (table, row["name"], row["scope_name"], row["attributes_json"],
               row["resource_attributes_json"])
        with self._lock:
            total = self._series.get(key)
            restart = (total is None or table == "metric_gauges"
                       or row.get("temporality") == "cumulative"
                       or (table == "metric_histograms"
                           and total["bounds_json"] != row["bounds_json"]))
            if restart:
                total = dict(row)
                if table != "metric_gauges":
                    total["temporality"] = "cumulative"
                self._series[key] = total
                return
            assert total is not None  # restart covers a new series
            total["timestamp_us"] = row["timestamp_us"]
            if table == "metric_sums":
                for column in _VALUE_COLUMNS[table]:
                    if row.get(column) is not None:
                        total[column] = _add(total.get(column), row[column])
                return
            total["count"] += row["count"]
            for kind in ("f64", "i64", "u64"):
                if row.get(f"sum_{kind}") is None:
                    continue
                total[f"sum_{kind}"] = _add(total.get(f"sum_{kind}"), row[f"sum_{kind}"])
                low, high = total.get(f"min_{kind}"), total.get(f"max_{kind}")
                total[f"min_{kind}"] = (row[f"min_{kind}"] if low is None
                                        else min(low, row[f"min_{kind}"]))
                total[f"max_{kind}"] = (row[f"max_{kind}"] if high is None
                                        else max(high, row[f"max_{kind}"]))
            counts = json.loads(total["bucket_counts_json"])
            more = json.loads(row["bucket_counts_json"])
            summed = [a + b for a, b in zip(counts, more, strict=True)]
            total["bucket_counts_json"] = json.dumps(summed, separators=(",", ":"))

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        """Every series' cumulative row (`temporality` "cumulative" for sums and histograms)."""
        with self._lock:
            return [(key[0], dict(row)) for key, row in self._series.items()]

    def text(self) -> str:
        """The series in Prometheus' text exposition format."""
        families: dict[str, tuple[str, list[str]]] = {}
        for table, row in sorted(self.rows(), key=lambda item: (item[1]["name"], item[0])):
            labels = _labels(row)
            base = _metric_name(row["name"])
            if table == "metric_histograms":
                lines = _histogram_lines(base, labels, row)
                kind = "histogram"
            elif table == "metric_sums" and row["is_monotonic"]:
                base += "_total"
                lines = [f"{base}{_label_text(labels)} {_number(row, table)}"]
                kind = "counter"
            else:
                lines = [f"{base}{_label_text(labels)} {_number(row, table)}"]
                kind = "gauge"
            known = families.setdefault(base, (kind, []))
            if known[0] == kind:  # one TYPE per name: a clashing kind is left out
                known[1].extend(lines)
        out = []
        for base, (kind, lines) in families.items():
            out.append(f"# TYPE {base} {kind}")
            out.extend(lines)
        return "\n".join(out) + "\n" if out else ""


def _metric_name(name: str) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9_:]", "_", name)
    return "_" + cleaned if cleaned[:1].isdigit() else cleaned


def _label_name(name: str) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9_]", "_", name)
    if cleaned[:1].isdigit():
        cleaned = "_" + cleaned
    return "key" + cleaned if cleaned.startswith("__") else cleaned  # `__` names are Prometheus'


def _labels(row: dict[str, Any]) -> dict[str, str]:
    labels = {_label_name(k): str(v) for k, v in json.loads(row["attributes_json"]).items()}
    labels["otel_scope_name"] = row["scope_name"]
    resource = json.loads(row["resource_attributes_json"])
    for key in ("service.name", "service.instance.id"):
        if resource.get(key):
            labels[_label_name(key)] = str(resource[key])
    return labels


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


def _format(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _number(row: dict[str, Any], table: str) -> str:
    for column in _VALUE_COLUMNS[table]:
        if row.get(column) is not None:
            return _format(row[column])
    return "0"


def _histogram_lines(base: str, labels: dict[str, str], row: dict[str, Any]) -> list[str]:
    bounds = json.loads(row["bounds_json"])
    counts = json.loads(row["bucket_counts_json"])
    lines = []
    running = 0
    for bound, count in zip([*bounds, math.inf], counts, strict=True):
        running += count
        bucket = {**labels, "le": _format(float(bound))}
        lines.append(f"{base}_bucket{_label_text(bucket)} {running}")
    total = next((row[c] for c in ("sum_f64", "sum_i64", "sum_u64") if row.get(c) is not None), 0)
    lines.append(f"{base}_sum{_label_text(labels)} {_format(total)}")
    lines.append(f"{base}_count{_label_text(labels)} {row['count']}")
    return lines


def serve_text(source: Callable[[], str], host: str = "127.0.0.1",
               port: int = 0) -> tuple[str, Callable[[], None]]:
    """Serve `source()` as Prometheus text at `http://host:port/metrics` from a daemon thread
    (`port` 0 picks a free one); returns the URL and a function that stops the server."""
    if not callable(source):
        raise TypeError(f"serve_text() needs a function returning the text, got "
                        f"{type(source).__name__}.")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "Only /metrics is served here.")
                return
            body = source().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Scrapes are not logged (one every few seconds)."""

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="monarch-prometheus",
                              daemon=True)
    thread.start()
    bound_host, bound_port = server.server_address[:2]
    host_text = str(bound_host)  # an IPv6 address is written in brackets in a URL
    shown = f"[{host_text}]" if ":" in host_text else host_text
    stopped = threading.Event()

    def stop() -> None:
        if not stopped.is_set():
            stopped.set()
            server.shutdown()
            server.server_close()
            thread.join()

    return f"http://{shown}:{bound_port}/metrics", stop
