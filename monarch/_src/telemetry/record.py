"""The producer side of telemetry: row schemas, stable ids, and the per-process sink.

While a job's telemetry is on, every process of it (the client, each proc) has one `Sink`:
`emit(table, row)` appends the row to a buffer, and the sink's thread sends the buffer every
`FLUSH_S` (or sooner, past `FLUSH_ROWS`) to the host-local collector over the Unix socket
`socket_path(apply_id)`, as msgpack frames (4-byte big-endian length, then `[[table, row],
...]`). With telemetry off `SINK` is None and `emit` costs one global read; callers on the
call path test `SINK is not None` before building a row at all.

A collector that is not (yet, or any more) listening never costs the caller: a failed send
keeps the batch for the next try, which reconnects. Nothing blocks on the collector: the
buffer is bounded (`MAX_BUFFERED` rows; past it the oldest are dropped and counted in
`Sink.dropped`).

Ids are u64: entities named by a stable string (an actor's full name, a mesh's full name)
get `stable_id(name)` so every process computes the same id without asking anyone; events get
`random_id()`. Actor full names use Monarch's `actor.proc@location` form, with `.` in our proc
ids written `_` (a label cannot hold `.` there).

The collector side (the tables in memory, SQL, the query API) is `monarch._src.job.telemetry_*`.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import random
import socket
import struct
import tempfile
import threading
import time
from typing import Any

import msgpack  # type: ignore[import-untyped]  # msgpack ships no type information

__all__ = [
    "FLUSH_ROWS",
    "FLUSH_S",
    "MAX_BUFFERED",
    "SCHEMAS",
    "SINK",
    "Sink",
    "actor_full_name",
    "decode_frames",
    "emit",
    "install",
    "now_us",
    "proc_label",
    "random_id",
    "socket_dir",
    "socket_path",
    "stable_id",
    "uninstall",
]

logger = logging.getLogger(__name__)

FLUSH_S = 0.1  # a row reaches the collector within about this long
FLUSH_ROWS = 2048  # ... or as soon as this many are waiting
MAX_BUFFERED = 200_000  # rows kept while the collector is unreachable; older ones are dropped

# Column types: u64/i64/i32/u32 integers, f64, utf8, bool. `!` marks a non-nullable column.
# The names, order and types are torchmonarch 0.7.0's (`information_schema.columns` there), so
# a query written against Monarch's telemetry runs unchanged here.
SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    "actors": (("id", "u64!"), ("timestamp_us", "i64!"), ("mesh_id", "u64!"), ("rank", "u64!"),
               ("full_name", "utf8!"), ("display_name", "utf8")),
    "actor_status_events": (("id", "u64!"), ("timestamp_us", "i64!"), ("actor_id", "u64!"),
                            ("new_status", "utf8!"), ("reason", "utf8")),
    "meshes": (("id", "u64!"), ("timestamp_us", "i64!"), ("class", "utf8!"),
               ("given_name", "utf8!"), ("full_name", "utf8!"), ("shape_json", "utf8!"),
               ("parent_mesh_id", "u64"), ("parent_view_json", "utf8")),
    "messages": (("id", "u64!"), ("timestamp_us", "i64!"), ("from_actor_id", "u64!"),
                 ("to_actor_id", "u64!"), ("endpoint", "utf8"), ("port_index", "u64")),
    "message_status_events": (("id", "u64!"), ("timestamp_us", "i64!"), ("message_id", "u64!"),
                              ("status", "utf8!")),
    "sent_messages": (("id", "u64!"), ("timestamp_us", "i64!"), ("sender_actor_id", "u64!"),
                      ("actor_mesh_id", "u64!"), ("view_json", "utf8!"), ("shape_json", "utf8!")),
    "spans": (("process_id", "utf8!"), ("id", "u64!"), ("name", "utf8!"), ("target", "utf8!"),
              ("level", "utf8!"), ("fields_json", "utf8!"), ("timestamp_us", "i64!"),
              ("parent_id", "u64"), ("thread_name", "utf8!"), ("file", "utf8"),
              ("line", "u32")),
    "span_events": (("process_id", "utf8!"), ("id", "u64!"), ("timestamp_us", "i64!"),
                    ("event_type", "utf8!")),
    "events": (("name", "utf8!"), ("target", "utf8!"), ("level", "utf8!"),
               ("fields_json", "utf8!"), ("timestamp_us", "i64!"), ("parent_span", "u64"),
               ("thread_id", "utf8!"), ("thread_name", "utf8!"), ("module_path", "utf8"),
               ("file", "utf8"), ("line", "u32")),
    "metric_sums": (("name", "utf8!"), ("timestamp_us", "i64!"), ("start_timestamp_us", "i64!"),
                    ("scope_name", "utf8!"), ("unit", "utf8!"), ("temporality", "utf8!"),
                    ("is_monotonic", "bool!"), ("attributes_json", "utf8!"),
                    ("resource_attributes_json", "utf8!"), ("sum_f64", "f64"),
                    ("sum_i64", "i64"), ("sum_u64", "u64")),
    "metric_gauges": (("name", "utf8!"), ("timestamp_us", "i64!"), ("start_timestamp_us", "i64"),
                      ("scope_name", "utf8!"), ("unit", "utf8!"), ("attributes_json", "utf8!"),
                      ("resource_attributes_json", "utf8!"), ("value_f64", "f64"),
                      ("value_i64", "i64"), ("value_u64", "u64")),
    "metric_histograms": (("name", "utf8!"), ("timestamp_us", "i64!"),
                          ("start_timestamp_us", "i64!"), ("scope_name", "utf8!"),
                          ("unit", "utf8!"), ("temporality", "utf8!"),
                          ("attributes_json", "utf8!"), ("resource_attributes_json", "utf8!"),
                          ("count", "u64!"), ("sum_f64", "f64"), ("sum_i64", "i64"),
                          ("sum_u64", "u64"), ("min_f64", "f64"), ("min_i64", "i64"),
                          ("min_u64", "u64"), ("max_f64", "f64"), ("max_i64", "i64"),
                          ("max_u64", "u64"), ("bounds_json", "utf8!"),
                          ("bucket_counts_json", "utf8!")),
    "pyspy_dumps": (("dump_id", "utf8!"), ("timestamp_us", "i64!"), ("pid", "i32!"),
                    ("binary", "utf8!"), ("proc_ref", "utf8!"), ("capture_mode", "utf8!"),
                    ("warnings_json", "utf8!")),
    "pyspy_stack_traces": (("dump_id", "utf8!"), ("pid", "i32!"), ("thread_id", "u64!"),
                           ("thread_name", "utf8"), ("os_thread_id", "u64"),
                           ("active", "bool!"), ("owns_gil", "bool!")),
    "pyspy_frames": (("dump_id", "utf8!"), ("thread_id", "u64!"), ("frame_depth", "i32!"),
                     ("name", "utf8!"), ("filename", "utf8!"), ("module", "utf8"),
                     ("short_filename", "utf8"), ("line", "i32!"), ("is_entry", "bool!")),
    "pyspy_local_variables": (("dump_id", "utf8!"), ("thread_id", "u64!"),
                              ("frame_depth", "i32!"), ("name", "utf8!"), ("addr", "u64!"),
                              ("arg", "bool!"), ("repr", "utf8")),
    # The mesh snapshot tables (torchmonarch's periodic introspection): defined, so queries
    # naming them run, but not filled by this version (see TelemetryConfig).
    "snapshots": (("snapshot_id", "utf8!"), ("snapshot_ts", "i64!")),
    "nodes": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("node_kind", "utf8!"),
              ("as_of", "i64!")),
    "root_nodes": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("num_hosts", "i64!"),
                   ("started_at", "i64!"), ("started_by", "utf8!")),
    "host_nodes": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("addr", "utf8!"),
                   ("host_num_procs", "i64!")),
    "proc_nodes": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("proc_name", "utf8!"),
                   ("num_actors", "i64!"), ("stopped_retention_cap", "i64!"),
                   ("is_poisoned", "bool!"), ("failed_actor_count", "i64!")),
    "actor_nodes": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("actor_status", "utf8!"),
                    ("actor_type", "utf8!"), ("instance_id", "utf8!"),
                    ("messages_processed", "i64!"), ("created_at", "i64"),
                    ("last_message_handler", "utf8"), ("total_processing_time_us", "i64!"),
                    ("queue_depth", "i64!"), ("is_system", "bool!")),
    "children": (("snapshot_id", "utf8!"), ("parent_id", "utf8!"), ("child_id", "utf8!"),
                 ("child_sort_key", "i64!"), ("is_system", "bool!"), ("is_stopped", "bool!")),
    "actor_failures": (("snapshot_id", "utf8!"), ("node_id", "utf8!"),
                       ("failure_error_message", "utf8!"), ("failure_root_cause_actor", "utf8!"),
                       ("failure_root_cause_name", "utf8"), ("failure_occurred_at", "i64!"),
                       ("failure_is_propagated", "bool!")),
    "actor_executions": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("active_count", "i64!"),
                         ("complete", "bool!"), ("truncated", "bool!")),
    "active_handlers": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("name", "utf8!"),
                        ("active_count", "i64!"), ("oldest_since", "i64!")),
    "actor_inbound_orderings": (("snapshot_id", "utf8!"), ("node_id", "utf8!"),
                                ("enabled", "bool!"), ("snapshot_complete", "bool!"),
                                ("skipped_session_count", "i64!"), ("known_session_count", "i64!"),
                                ("returned_buffered_session_count", "i64!"),
                                ("returned_buffered_message_count", "i64!"),
                                ("returned_max_buffered_count", "i64!")),
    "ordering_sessions": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("session_id", "utf8!"),
                          ("sender", "utf8"), ("last_released_seq", "i64!"),
                          ("expected_next_seq", "i64!"), ("buffered_count", "i64!"),
                          ("oldest_buffered_seq", "i64"), ("newest_buffered_seq", "i64")),
    "resolution_errors": (("snapshot_id", "utf8!"), ("node_id", "utf8!"), ("error_code", "utf8!"),
                          ("error_message", "utf8!")),
}

# Tables whose rows are history, trimmed to the job's `retention_secs` by `timestamp_us`; the
# entity tables (actors, meshes) and the py-spy dumps stay for the job's life.
RETAINED = frozenset({"actor_status_events", "messages", "message_status_events",
                      "sent_messages", "spans", "span_events", "events", "metric_sums",
                      "metric_gauges", "metric_histograms"})


def socket_dir(apply_id: str) -> str:
    """The host-local directory of job `apply_id`'s collector socket (mode 0700), in the
    temporary folder (`TMPDIR`, which procs inherit from the client)."""
    return os.path.join(tempfile.gettempdir(), f"monarch_{apply_id}")


def socket_path(apply_id: str) -> str:
    """The Unix socket the host-local collector of job `apply_id` listens on."""
    return os.path.join(socket_dir(apply_id), "telemetry.sock")


def stable_id(name: str) -> int:
    """The u64 id of the entity called `name`: the same in every process."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


def random_id() -> int:
    """A fresh u64 id for one event."""
    return random.getrandbits(64)


def now_us() -> int:
    """Microseconds since the epoch."""
    return time.time_ns() // 1000


def proc_label(proc_id: str) -> str:
    """`proc_id` as the proc part of an actor's full name (no `.` or `@` there)."""
    return proc_id.replace(".", "_").replace("@", "_")


_URL_SCHEMES = {"local": "inproc", "unix": "ipc"}  # channel scheme -> the URL scheme printed


def _location(addr: str) -> str:
    scheme, _, rest = addr.partition(":")
    return f"{_URL_SCHEMES.get(scheme, scheme)}://{rest.removeprefix('//')}"


def actor_full_name(label: str, proc_id: str, addr: str) -> str:
    """Monarch's `actor.proc@location` name of actor `label` in proc `proc_id` at `addr`."""
    return f"{label.replace('.', '_').replace('@', '_')}.{proc_label(proc_id)}@{_location(addr)}"


class Sink:
    """Batches this process's rows to the collector at `path` (see the module doc)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.dropped = 0  # rows lost: buffer overflow or a failed send
        self.sent = 0
        self._rows: list[list[Any]] = []
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # one sender at a time: frames never interleave
        self._wake = threading.Event()
        self._closed = False
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="monarch-telemetry-sink",
                                        daemon=True)
        self._thread.start()

    def put(self, table: str, row: dict[str, Any]) -> None:
        with self._lock:
            rows = self._rows
            rows.append([table, row])
            if len(rows) > MAX_BUFFERED:
                del rows[: len(rows) - MAX_BUFFERED]
                self.dropped += 1
            if len(rows) >= FLUSH_ROWS:
                self._wake.set()

    def flush(self) -> None:
        """Send what is buffered now (on the caller's thread)."""
        with self._lock:
            batch, self._rows = self._rows, []
        if batch:
            self._send(batch)

    def close(self) -> None:
        """Send what is left and stop the thread."""
        self._closed = True
        self._wake.set()
        self.flush()
        with self._send_lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(FLUSH_S)
            self._wake.clear()
            self.flush()

    def _send(self, batch: list[list[Any]]) -> None:
        frame = msgpack.packb(batch, use_bin_type=True)
        with self._send_lock:
            try:
                if self._sock is None:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    sock.settimeout(5.0)
                    try:
                        sock.connect(self.path)
                    except OSError:
                        sock.close()
                        raise
                    self._sock = sock
                self._sock.sendall(struct.pack(">I", len(frame)) + frame)
                self.sent += len(batch)
            except OSError as err:
                if self._sock is not None:
                    self._sock.close()
                    self._sock = None
                # Kept for the next try (the collector may not be up yet), within the bound.
                with self._lock:
                    self._rows[:0] = batch
                    excess = len(self._rows) - MAX_BUFFERED
                    if excess > 0:
                        del self._rows[:excess]
                        self.dropped += excess
                logger.debug("telemetry rows held (collector %s unreachable: %s)", self.path,
                             err)


def decode_frames(buffer: bytearray) -> list[list[Any]]:
    """Take the complete frames off the front of `buffer`; return their rows, in order."""
    rows: list[list[Any]] = []
    while len(buffer) >= 4:
        (size,) = struct.unpack_from(">I", buffer)
        if len(buffer) < 4 + size:
            break
        rows.extend(msgpack.unpackb(bytes(buffer[4:4 + size]), raw=False))
        del buffer[: 4 + size]
    return rows


SINK: Sink | None = None  # this process's sink while telemetry is on


def emit(table: str, row: dict[str, Any]) -> None:
    """Record `row` in `table` (nothing when telemetry is off in this process)."""
    sink = SINK
    if sink is not None:
        sink.put(table, row)


def install(path: str) -> Sink:
    """Send this process's rows to the collector at `path` from now on (idempotent)."""
    global SINK
    sink = SINK
    if sink is not None and sink.path == path:
        return sink
    if sink is not None:
        sink.close()
    SINK = Sink(path)
    return SINK


def uninstall() -> None:
    """Stop recording in this process (what is buffered is sent first)."""
    global SINK
    sink, SINK = SINK, None
    if sink is not None:
        sink.close()


def _forget_after_fork() -> None:
    # A forked child inherits SINK but not its thread: it records nothing until it installs
    # its own sink (what it inherited buffered is the parent's to send).
    global SINK
    SINK = None


os.register_at_fork(after_in_child=_forget_after_fork)


@atexit.register
def _flush_at_exit() -> None:
    sink = SINK
    if sink is not None:
        sink.flush()
