"""One host's telemetry tables in memory, and the Unix-socket ingest that fills them.

A `TelemetryStore` keeps, per table of `record.SCHEMAS`, the rows the host's processes sent
(plain dicts, appended under a lock) and builds a pyarrow table of them on demand (cached until
the next append). History tables (`record.RETAINED`) are trimmed by `timestamp_us` to the last
`retention_secs` (0 keeps everything) whenever rows arrive or a scan runs; the entity tables
(`actors`, `meshes`) and the py-spy dumps are kept for the job's life, since every history row
refers to them.

`start_socket_ingest(store, path)` binds the collector's socket; a path where a live collector
already answers is refused (`RuntimeError`), a stale one (its collector died) is replaced.
Rows of an unknown table are dropped and counted (`store.unknown`), never an error: a newer
producer may know tables this collector does not.
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import socketserver
import threading
import time
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

from monarch._src.telemetry import record
from monarch._src.telemetry.prometheus import METRIC_TABLES, Totals

__all__ = ["ARROW_TYPES", "TelemetryStore", "arrow_schema", "from_ipc", "ipc_bytes",
           "start_socket_ingest"]

logger = logging.getLogger(__name__)

ARROW_TYPES: dict[str, pa.DataType] = {
    "u64": pa.uint64(), "i64": pa.int64(), "i32": pa.int32(), "u32": pa.uint32(),
    "f64": pa.float64(), "utf8": pa.utf8(), "bool": pa.bool_(),
}


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of telemetry table `table`."""
    return pa.schema([
        pa.field(name, ARROW_TYPES[kind.rstrip("!")], nullable=not kind.endswith("!"))
        for name, kind in record.SCHEMAS[table]
    ])


_SCHEMAS = {table: arrow_schema(table) for table in record.SCHEMAS}


class TelemetryStore:
    """The tables of one collector (see the module doc). Thread-safe."""

    def __init__(self, rank: int = 0, retention_secs: int = 0) -> None:
        if retention_secs < 0:
            raise ValueError(
                f"TelemetryStore retention_secs must be >= 0 (0 keeps every row), got "
                f"{retention_secs}."
            )
        self.rank = rank
        self.retention_secs = retention_secs
        self.unknown = 0  # rows dropped because their table is unknown here
        # The metric rows folded into running totals as they arrive (the job's /metrics):
        # cumulative, so retention trimming the delta rows never shrinks a counter.
        self.totals = Totals()
        self._rows: dict[str, list[dict[str, Any]]] = {t: [] for t in _SCHEMAS}
        self._built: dict[str, pa.Table] = {}
        self._lock = threading.Lock()
        self._trimmed_at = 0.0

    def table_names(self) -> list[str]:
        return sorted(self._rows)

    def schema(self, table: str) -> pa.Schema:
        try:
            return _SCHEMAS[table]
        except KeyError:
            raise ValueError(
                f"No telemetry table {table!r}; the tables are: {', '.join(sorted(_SCHEMAS))}."
            ) from None

    def append(self, rows: list[list[Any]]) -> None:
        """Add `[table, row]` pairs (what `record.decode_frames` returns)."""
        with self._lock:
            for table, row in rows:
                into = self._rows.get(table)
                if into is None:
                    self.unknown += 1
                    continue
                into.append(row)
                self._built.pop(table, None)
                if table in METRIC_TABLES:
                    self.totals.fold(table, row)
        if self.retention_secs and time.monotonic() - self._trimmed_at > 1.0:
            self.trim()

    def trim(self) -> None:
        """Drop the history rows older than `retention_secs`."""
        if not self.retention_secs:
            return
        oldest = record.now_us() - self.retention_secs * 1_000_000
        with self._lock:
            self._trimmed_at = time.monotonic()
            for table in record.RETAINED:
                rows = self._rows[table]
                kept = [row for row in rows if row.get("timestamp_us", 0) >= oldest]
                if len(kept) != len(rows):
                    self._rows[table] = kept
                    self._built.pop(table, None)

    def table(self, table: str) -> pa.Table:
        """All rows of `table` now, as a pyarrow table."""
        schema = self.schema(table)
        self.trim()
        with self._lock:
            built = self._built.get(table)
            if built is None:
                built = self._built[table] = pa.Table.from_pylist(self._rows[table],
                                                                  schema=schema)
            return built

    def scan(self, table: str, projection: list[int] | None = None, limit: int | None = None,
             filter_expr: str | None = None) -> pa.Table:
        """Rows of `table`: those matching the SQL predicate `filter_expr` (all when None),
        at most `limit`, with the columns at indices `projection` (all when None)."""
        data = self.table(table)
        if filter_expr:
            import datafusion

            ctx = datafusion.SessionContext()
            empty = [pa.RecordBatch.from_pylist([], schema=data.schema)]
            ctx.register_record_batches(table, [data.to_batches() or empty])
            data = ctx.sql(f'SELECT * FROM "{table}" WHERE {filter_expr}').to_arrow_table()
        if projection is not None:
            data = data.select(list(projection))
        if limit is not None:
            data = data.slice(0, limit)
        return data

    def store_pyspy_dump(self, dump_id: str, proc_ref: str, pyspy_result_json: str) -> None:
        """Add one py-spy dump (py-spy's `{"Ok": {...}}` JSON result) to the pyspy_* tables."""
        try:
            result = json.loads(pyspy_result_json)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"store_pyspy_dump({dump_id!r}): the dump is not JSON: {err}") from None
        ok = result.get("Ok") if isinstance(result, dict) else None
        if not isinstance(ok, dict):
            raise ValueError(
                f"store_pyspy_dump({dump_id!r}): expected py-spy's result object "
                f"{{\"Ok\": {{\"pid\": ..., \"stack_traces\": [...]}}}}, got {str(result)[:200]}"
            )
        rows: list[list[Any]] = [["pyspy_dumps", {
            "dump_id": dump_id, "timestamp_us": record.now_us(), "pid": int(ok.get("pid", 0)),
            "binary": str(ok.get("binary", "")), "proc_ref": proc_ref,
            "capture_mode": str(ok.get("capture_mode", "native" if ok.get("native") else "python")),
            "warnings_json": json.dumps(ok.get("warnings", [])),
        }]]
        for trace in ok.get("stack_traces", []):
            tid = int(trace.get("thread_id", 0))
            rows.append(["pyspy_stack_traces", {
                "dump_id": dump_id, "pid": int(trace.get("pid", ok.get("pid", 0))),
                "thread_id": tid, "thread_name": trace.get("thread_name"),
                "os_thread_id": trace.get("os_thread_id"), "active": bool(trace.get("active")),
                "owns_gil": bool(trace.get("owns_gil")),
            }])
            for depth, frame in enumerate(trace.get("frames", [])):
                rows.append(["pyspy_frames", {
                    "dump_id": dump_id, "thread_id": tid, "frame_depth": depth,
                    "name": str(frame.get("name", "")), "filename": str(frame.get("filename", "")),
                    "module": frame.get("module"), "short_filename": frame.get("short_filename"),
                    "line": int(frame.get("line", 0)), "is_entry": bool(frame.get("is_entry")),
                }])
                for local in frame.get("locals") or []:
                    rows.append(["pyspy_local_variables", {
                        "dump_id": dump_id, "thread_id": tid, "frame_depth": depth,
                        "name": str(local.get("name", "")), "addr": int(local.get("addr", 0)),
                        "arg": bool(local.get("arg")), "repr": local.get("repr"),
                    }])
        self.append(rows)


def ipc_bytes(data: pa.Table) -> bytes:
    """`data` as an Arrow IPC stream."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_table(data)
    return sink.getvalue()


def from_ipc(payload: bytes) -> pa.Table:
    """The table of an Arrow IPC stream (`ipc_bytes`)."""
    return pa.ipc.open_stream(payload).read_all()


class _Ingest(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    store: TelemetryStore


class _Reader(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: _Ingest = self.server  # type: ignore[assignment]
        buffer = bytearray()
        while True:
            try:
                chunk = self.request.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            try:
                rows = record.decode_frames(buffer)
            except ValueError as err:  # msgpack's errors are ValueErrors: a corrupt stream
                logger.warning("telemetry ingest: dropping a corrupt stream: %s", err)
                return
            if rows:
                server.store.append(rows)


def start_socket_ingest(store: TelemetryStore, path: str) -> _Ingest:
    """Serve `path` for `store` on a daemon thread; `RuntimeError` when a live collector has it."""
    if os.path.exists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # stale: its collector is gone
        else:
            raise RuntimeError(f"telemetry socket {path} already has a live collector")
        finally:
            probe.close()
    server = _Ingest(path, _Reader)
    os.chmod(path, 0o600)
    server.store = store
    threading.Thread(target=server.serve_forever, name="monarch-telemetry-ingest",
                     daemon=True).start()
    return server
