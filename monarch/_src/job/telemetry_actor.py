"""`TelemetryActor`: one host's telemetry collector, and the query root of a job.

Each host of a job with telemetry on has at most one live collector: the actor that binds the
host-local socket `telemetry_socket_path(apply_id)` owns the host's `TelemetryStore`; every
process of the job on that host sends its rows there (`record.Sink`). A second candidate on the
same host (the client's machine also runs a job host in a `ProcessJob`) fails to bind, stays
inactive and is stopped: each row is stored exactly once.

The collector in the client process is the query root: `start_worker_collector(host_mesh)`
spawns a `telemetry_hosts` proc per host of the mesh with a collector each, and keeps the
active ones. `scan(table, ...)` returns the root's rows plus every worker collector's, as an
Arrow IPC stream; a worker that fails, is stopped or does not answer within
`_SCAN_WORKER_TIMEOUT_SECS` reduces what the query covers and is logged, it never fails the
query. A worker collector mesh that fails is dropped from the fan-out (`__supervise__`).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from typing import Any

from monarch._src.job.telemetry_store import (
    TelemetryStore,
    from_ipc,
    ipc_bytes,
    start_socket_ingest,
)
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import current_rank
from monarch._src.telemetry import record

__all__ = ["TelemetryActor", "telemetry_socket_dir",
           "telemetry_socket_path"]

logger = logging.getLogger(__name__)

_SCAN_WORKER_TIMEOUT_SECS = 10.0

telemetry_socket_dir = record.socket_dir
telemetry_socket_path = record.socket_path


def _start_socket_ingest(store: TelemetryStore, path: str) -> Any:
    return start_socket_ingest(store, path)


class TelemetryActor(Actor):
    """A host's collector (see the module doc). `retention_secs`: 0 keeps every row."""

    def __init__(self, apply_id: str, retention_secs: int) -> None:
        self._apply_id = apply_id
        self._retention_secs = retention_secs
        self._scanner: TelemetryStore | None = None  # set once this actor owns the socket
        self._ingest: Any = None
        self._worker_collectors: dict[str, Any] = {}  # mesh name -> active collector mesh
        self._worker_proc_meshes: list[Any] = []

    def _scanner_or_raise(self) -> TelemetryStore:
        if self._scanner is None:
            raise RuntimeError(
                f"{type(self).__name__} for job {self._apply_id} is not an active telemetry "
                "collector (another collector owns this host's socket, or activate() failed)"
            )
        return self._scanner

    def _activate_impl(self) -> bool:
        """Bind the host's socket and start the store; False when that fails. Idempotent."""
        if self._scanner is not None:
            return True
        directory = telemetry_socket_dir(self._apply_id)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)  # makedirs' mode is masked by the umask
        store = TelemetryStore(current_rank().rank, retention_secs=self._retention_secs)
        try:
            self._ingest = _start_socket_ingest(store, telemetry_socket_path(self._apply_id))
        except Exception as err:
            logger.info("telemetry collector of job %s not activated: %s", self._apply_id, err)
            return False
        self._scanner = store
        return True

    def __cleanup__(self, exc: Exception | None) -> None:
        """Close the socket this collector owns and remove its directory."""
        ingest, self._ingest = self._ingest, None
        if ingest is not None:
            ingest.shutdown()
            ingest.server_close()
            shutil.rmtree(telemetry_socket_dir(self._apply_id), ignore_errors=True)

    @endpoint
    def activate(self) -> bool:
        """Become this host's collector (see `_activate_impl`)."""
        return self._activate_impl()

    @endpoint
    def start_worker_collector(self, host_mesh: Any, spawn_worker_collector: bool = True) -> None:
        """Start collectors on the hosts of `host_mesh` and scan the active ones from here."""
        self._scanner_or_raise()
        self._start_worker_collector(host_mesh, TelemetryActor, self._apply_id,
                                     "telemetry_hosts", spawn_worker_collector)

    def _start_worker_collector(self, host_mesh: Any, actor_class: type[TelemetryActor],
                                apply_id: str, proc_name: str,
                                spawn_worker_collector: bool = True) -> Any:
        procs = host_mesh.spawn_procs(name=proc_name)
        self._worker_proc_meshes.append(procs)
        if not spawn_worker_collector:
            return None
        try:
            # A name of its own: a failure names the mesh (`__supervise__` drops that one).
            mesh = procs.spawn(f"telemetry_collector_{uuid.uuid4().hex[:8]}", actor_class,
                               apply_id, self._retention_secs)
            active = any(ok for _, ok in mesh.activate.call().get().items())
        except Exception:
            self._stop(procs, "telemetry collector start-up failed")
            raise
        if not active:  # this host's socket has a collector already (e.g. the client's)
            self._stop(mesh, "telemetry collector inactive")
            return None
        self._worker_collectors[mesh._name] = mesh
        return mesh

    @endpoint
    def stop_worker_collectors(self) -> None:
        """Stop every worker collector's procs (the job is going away)."""
        for procs in self._worker_proc_meshes:
            self._stop(procs, "telemetry shutdown")
        self._worker_proc_meshes.clear()
        self._worker_collectors.clear()

    @staticmethod
    def _stop(mesh: Any, reason: str) -> None:
        try:
            mesh.stop(reason).get(timeout=5.0)
        except Exception:
            logger.info("stopping a telemetry mesh (%s) failed", reason, exc_info=True)

    def __supervise__(self, failure: Any) -> bool:
        self._worker_collectors.pop(failure.mesh_name, None)
        logger.warning("a worker telemetry collector failed; queries skip it: %s", failure)
        return True

    def _from_workers(self, endpoint_name: str, *args: Any) -> list[Any]:
        """Every worker collector's answers to `endpoint_name(*args)`, asked at once. A worker
        that fails is dropped from the fan-out; one that does not answer within
        `_SCAN_WORKER_TIMEOUT_SECS` is skipped this time (both logged)."""
        pending = []
        for name, mesh in tuple(self._worker_collectors.items()):
            try:
                pending.append((name, getattr(mesh, endpoint_name).call(*args)))
            except Exception:
                logger.info("telemetry %s of %s not sent; dropping it", endpoint_name, name,
                            exc_info=True)
                self._worker_collectors.pop(name, None)
        answers: list[Any] = []
        for name, future in pending:
            try:
                answers += [a for _, a in future.get(timeout=_SCAN_WORKER_TIMEOUT_SECS).items()]
            except TimeoutError:
                logger.warning("telemetry %s of %s timed out after %ss; skipped", endpoint_name,
                               name, _SCAN_WORKER_TIMEOUT_SECS)
            except Exception:
                logger.info("telemetry %s of %s failed; dropping it", endpoint_name, name,
                            exc_info=True)
                self._worker_collectors.pop(name, None)
        return answers

    @endpoint
    def table_names(self) -> list[str]:
        """The tables of this collector."""
        return self._scanner_or_raise().table_names()

    @endpoint
    def schema_for(self, table: str) -> bytes:
        """`table`'s Arrow schema, serialized (IPC)."""
        schema: bytes = self._scanner_or_raise().schema(table).serialize().to_pybytes()
        return schema

    @endpoint
    def store_pyspy_dump(self, dump_id: str, proc_ref: str, pyspy_result_json: str) -> bool:
        """Add a py-spy dump (py-spy's JSON result) to the pyspy_* tables here."""
        self._scanner_or_raise().store_pyspy_dump(dump_id, proc_ref, pyspy_result_json)
        return True

    @endpoint
    def metric_totals(self) -> list[tuple[str, dict[str, Any]]]:
        """The cumulative metric series here and on every worker collector (`Totals.rows`)."""
        rows = self._scanner_or_raise().totals.rows()
        for more in self._from_workers("metric_totals"):
            rows.extend(more)
        return rows

    @endpoint
    def scan(self, table_name: str, projection: list[int] | None = None,
             limit: int | None = None, filter_expr: str | None = None) -> bytes:
        """`table_name`'s rows here and on every worker collector, as one Arrow IPC stream."""
        import pyarrow as pa  # type: ignore[import-untyped]  # no type information

        parts = [self._scanner_or_raise().scan(table_name, projection, limit, filter_expr)]
        parts += [from_ipc(payload) for payload in self._from_workers(
            "scan", table_name, projection, limit, filter_expr)]
        data = pa.concat_tables(parts)
        if limit is not None:
            data = data.slice(0, limit)
        return ipc_bytes(data)
