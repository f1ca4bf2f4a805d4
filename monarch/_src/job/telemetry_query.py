"""SQL over a job's telemetry: `QueryEngine` (DataFusion over the collectors' tables) and the
HTTP query API the client's `QueryEngineClient` and the dashboard use.

A query runs in a fresh DataFusion session (information_schema on) where every telemetry table
is registered: the tables the SQL names (matched as whole words) with the rows the query root's
`scan` gathers from all collectors, the others empty with their schema, so `information_schema`
and `DESCRIBE` list all of them. Gathering only the named tables keeps a query's cost to what it
reads.

`TelemetryServer` serves, on loopback by default (`host`, `port`; 0 picks a free one):
* `POST /api/query` `{"sql": "..."}` -> `{"rows": [{column: value}, ...]}`; a bad query is a
  400 `{"error": message}` naming DataFusion's complaint;
* `POST /api/pyspy_dump` `{"dump_id", "proc_ref", "pyspy_result_json"}` -> `{"status": "ok"}`;
* `GET /healthz` -> `{"ok": true}`;
* `GET /metrics` -> every process's metrics as running totals in Prometheus' text format (each
  collector folds the metric rows it receives; a Prometheus scrapes the job here);
and the routes other features mount with `add_route(method, path, handler)` (the dashboard).
The API only reads telemetry and adds py-spy dumps; it listens on loopback unless the user
names another interface. Against pages open in the user's browser: a request whose `Host` is
not this server's (a DNS-rebinding page) is refused (421), and a POST must be
`Content-Type: application/json`, which a cross-site form cannot send without a CORS preflight
that this server never grants (415).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

from monarch._src.job.telemetry_store import arrow_schema, from_ipc
from monarch._src.telemetry import record
from monarch._src.telemetry.prometheus import CONTENT_TYPE, Totals

__all__ = ["QueryEngine", "TelemetryServer", "json_rows"]

logger = logging.getLogger(__name__)

SCAN_TIMEOUT_SECS = 30.0


class QueryEngine:
    """SQL over the collectors behind `actor`, a query-root `TelemetryActor` mesh (one rank)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    def __reduce__(self) -> tuple[Any, ...]:
        return (QueryEngine, (self._actor,))

    def query(self, sql: str) -> pa.Table:
        """Run `sql`; the result as a pyarrow table."""
        import datafusion

        if not isinstance(sql, str) or not sql.strip():
            raise ValueError(f"QueryEngine.query needs a SQL string, got {sql!r}.")
        record_sink = record.SINK
        if record_sink is not None:
            record_sink.flush()  # this process's own rows first
        ctx = datafusion.SessionContext(datafusion.SessionConfig().with_information_schema(True))
        for table in record.SCHEMAS:
            schema = arrow_schema(table)
            if re.search(rf"\b{table}\b", sql, re.IGNORECASE):
                payload = self._actor.scan.call_one(table, None, None, None).get(
                    timeout=SCAN_TIMEOUT_SECS)
                data = from_ipc(payload)
                batches = data.to_batches() or [pa.RecordBatch.from_pylist([], schema=schema)]
            else:
                batches = [pa.RecordBatch.from_pylist([], schema=schema)]
            ctx.register_record_batches(table, [batches])
        return ctx.sql(sql).to_arrow_table()

    def query_stream(self, sql: str) -> pa.RecordBatchReader:
        """Run `sql`; the result as a reader of record batches."""
        return self.query(sql).to_reader()


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def json_rows(table: pa.Table) -> list[dict[str, Any]]:
    """`table`'s rows as JSON-ready dicts (bytes as base64, times as ISO text)."""
    return [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]


Handler = Callable[[dict[str, Any]], tuple[int, str, bytes]]


class TelemetryServer:
    """The telemetry HTTP API of one job (see the module doc), on its own threads."""

    def __init__(self, engine: QueryEngine, root: Any, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.engine = engine
        self.root = root
        self._routes: dict[tuple[str, str], Handler] = {
            ("POST", "/api/query"): self._query,
            ("POST", "/api/pyspy_dump"): self._pyspy_dump,
            ("GET", "/healthz"): lambda _: _json(200, {"ok": True}),
            ("GET", "/metrics"): self._metrics,
        }
        server = self

        class Request(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server._dispatch(self, "GET")

            def do_POST(self) -> None:
                server._dispatch(self, "POST")

            def log_message(self, fmt: str, *args: Any) -> None:
                logger.debug("telemetry http: " + fmt, *args)

        try:
            self._http = ThreadingHTTPServer((host, port), Request)
        except OSError as err:
            raise RuntimeError(
                f"The telemetry server could not listen on {host}:{port}: {err}. Pick another "
                "port with TelemetryConfig(dashboard_port=...) (0 = any free port)."
            ) from err
        self._http.daemon_threads = True
        # The names a request's Host may carry: loopback's, and the interface bound (any,
        # when bound to every interface: then the user chose who may connect).
        wildcard = host in ("", "0.0.0.0", "::")
        self._hosts: set[str] | None = None if wildcard else {
            "localhost", "127.0.0.1", "::1", host, socket.gethostname()}
        self.url = f"http://{'localhost' if host in ('127.0.0.1', '::1') else host}:" \
                   f"{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever,
                                        name="monarch-telemetry-http", daemon=True)
        self._thread.start()

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Serve `method path` with `handler(request) -> (status, content type, body)`;
        `request` has "path", "query" (the raw query string), "headers" (the request's) and
        "body" (bytes)."""
        self._routes[(method, path)] = handler

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def _refusal(self, req: BaseHTTPRequestHandler, method: str) -> tuple[int, str, bytes] | None:
        host = req.headers.get("Host")
        if host is not None and self._hosts is not None:
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name.strip("[]") not in self._hosts:
                logger.warning("telemetry http: refused a request for Host %r", host)
                return _json(421, {"error": f"this server does not answer for host {host!r}"})
        ctype = (req.headers.get("Content-Type") or "").split(";")[0].strip()
        if method == "POST" and ctype != "application/json":
            return _json(415, {"error": "POST needs Content-Type: application/json"})
        return None

    def _dispatch(self, req: BaseHTTPRequestHandler, method: str) -> None:
        path, _, query = req.path.partition("?")
        handler = self._routes.get((method, path)) or self._routes.get((method, "*"))
        refused = self._refusal(req, method)
        if refused is not None:
            status, ctype, body = refused
        elif handler is None:
            status, ctype, body = _json(404, {"error": f"no route {method} {path}"})
        else:
            length = int(req.headers.get("Content-Length") or 0)
            request = {"path": path, "query": query, "headers": dict(req.headers.items()),
                       "body": req.rfile.read(length) if length else b""}
            try:
                status, ctype, body = handler(request)
            except Exception as err:
                logger.info("telemetry http %s %s failed", method, path, exc_info=True)
                status, ctype, body = _json(500, {"error": f"{type(err).__name__}: {err}"})
        req.send_response(status)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    def _query(self, request: dict[str, Any]) -> tuple[int, str, bytes]:
        body = _body_json(request)
        sql = body.get("sql")
        if not isinstance(sql, str):
            return _json(400, {"error": 'expected a JSON body {"sql": "SELECT ..."}'})
        try:
            table = self.engine.query(sql)
        except Exception as err:
            if type(err).__module__.startswith("datafusion") or "DataFusion" in str(err) \
                    or isinstance(err, ValueError):
                return _json(400, {"error": str(err)})
            raise
        return _json(200, {"rows": json_rows(table)})

    def _metrics(self, request: dict[str, Any]) -> tuple[int, str, bytes]:
        totals = Totals()
        for table, row in self.root.metric_totals.call_one().get(timeout=SCAN_TIMEOUT_SECS):
            totals.fold(table, row)
        return 200, CONTENT_TYPE, totals.text().encode()

    def _pyspy_dump(self, request: dict[str, Any]) -> tuple[int, str, bytes]:
        body = _body_json(request)
        try:
            args = [body[field] for field in ("dump_id", "proc_ref", "pyspy_result_json")]
        except KeyError as missing:
            return _json(400, {"error": f"missing field {missing} (dump_id, proc_ref, "
                                        "pyspy_result_json)"})
        self.root.store_pyspy_dump.call_one(*args).get(timeout=SCAN_TIMEOUT_SECS)
        return _json(200, {"status": "ok"})


def _body_json(request: dict[str, Any]) -> dict[str, Any]:
    try:
        body = json.loads(request["body"] or b"{}")
    except json.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def _json(status: int, value: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(value, default=str).encode()
