"""`TelemetryConfig` and the telemetry of one running job (`Telemetry`).

`job.enable_telemetry(TelemetryConfig(...))` makes `job.state()` start, in the client process:
the query-root `TelemetryActor` on the client's own proc (the collector of this host), this
process's sink, a worker collector per host of each of the job's host meshes (inactive, and
stopped, where it shares the client's host), and the HTTP API (`TelemetryServer`) at
`state.telemetry_url`, which `state.query_engine_client` talks to. Every proc the job spawns
from then on records into its host's collector (`mesh/observe.py`, `telemetry/record.py`).

A second `state()` on the running job reuses all of it. `stop()` (the job's kill) stops the
server, the worker collectors and this process's sink.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from monarch._src.telemetry import metrics, record

__all__ = ["Telemetry", "TelemetryConfig"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class TelemetryConfig:
    """What `job.enable_telemetry` starts with `state()`.

    retention_secs: history rows (messages, status events, spans, metrics) older than this
        are dropped; 0 keeps everything. Actors, meshes and py-spy dumps are always kept.
    include_dashboard: serve the Monarch Dashboard (`monarch._src.dashboard`: Overview,
        Topology and Explorer views over these tables, hang triage) on the telemetry server;
        `state.dashboard_url` is its address. False: `dashboard_url` stays None.
    dashboard_port: with `include_dashboard`, the port of the telemetry HTTP API, which serves
        the dashboard too (0: any free port; a port in use is an error). Without the dashboard
        the API takes any free port, as torchmonarch's does: no fixed port is opened unless
        the dashboard is asked for (so jobs on one machine do not contend for it).
    snapshot_interval_secs: every this many seconds the mesh (root, hosts, procs, actors, as
        the admin API sees it) is recorded into the snapshot tables (`snapshots`, `nodes`,
        `children`, `actor_nodes`, ...: `telemetry_snapshots.py`); 0 disables them.
    """

    retention_secs: int = 3600
    include_dashboard: bool = False
    dashboard_port: int = 8265
    snapshot_interval_secs: float = 30.0

    def __post_init__(self) -> None:
        for name in ("retention_secs", "dashboard_port"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"TelemetryConfig.{name} must be an int >= 0, got {value!r}.")
        if self.dashboard_port > 65535:
            raise ValueError(
                f"TelemetryConfig.dashboard_port must be a TCP port (0-65535), got "
                f"{self.dashboard_port}.")
        if not isinstance(self.include_dashboard, bool):
            raise TypeError("TelemetryConfig.include_dashboard must be a bool, got "
                            f"{self.include_dashboard!r}.")
        interval = self.snapshot_interval_secs
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
            raise ValueError("TelemetryConfig.snapshot_interval_secs must be a number >= 0, "
                             f"got {interval!r}.")


_LINKED: list[Telemetry] = []  # the running telemetries the admin API may serve, oldest first


class Telemetry:
    """The live telemetry of one job in this (the client) process."""

    def __init__(self, config: TelemetryConfig) -> None:
        self.config = config
        self.root: Any = None  # the query-root TelemetryActor mesh
        self.server: Any = None  # the TelemetryServer
        self.snapshots: Any = None  # the SnapshotTimer, with snapshot_interval_secs
        self.apply_id: str | None = None
        self.dashboard_url: str | None = None  # set by mount_dashboard, once per server

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    @staticmethod
    def check_installed() -> None:
        """Raise `ImportError` saying what to install when the SQL engine is missing."""
        import importlib.util

        missing = [m for m in ("pyarrow", "datafusion") if importlib.util.find_spec(m) is None]
        if missing:
            raise ImportError(
                f"Telemetry needs {' and '.join(missing)} (the tables and the SQL engine): "
                "pip install 'monarch[telemetry]' (or pip install pyarrow datafusion).")

    def start(self, apply_id: str, hosts: dict[str, Any]) -> None:
        """Start (once) the telemetry of job `apply_id` whose host meshes are `hosts`."""
        if self.root is not None:
            return
        from monarch._src.job.telemetry_actor import TelemetryActor
        from monarch._src.job.telemetry_query import QueryEngine, TelemetryServer
        from monarch._src.lowlevel import get_runtime
        from monarch._src.mesh import observe
        from monarch._src.mesh.context import current_instance
        from monarch._src.mesh.proc_mesh import this_proc

        directory = record.socket_dir(apply_id)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
        record.install(record.socket_path(apply_id))
        metrics.start("monarch-client")
        rt = get_runtime()
        observe.client_started(current_instance(), rt.address, rt.proc_id)
        root = this_proc().spawn("telemetry", TelemetryActor, apply_id,
                                 self.config.retention_secs)
        if not root.activate.call_one().get():
            root.stop("telemetry collector inactive")
            record.uninstall()
            raise RuntimeError(
                f"The telemetry collector of job {apply_id} could not bind "
                f"{record.socket_path(apply_id)}: another collector of the same job runs on "
                "this host (see the log for why).")
        self.root, self.apply_id = root, apply_id
        for name, host_mesh in hosts.items():
            observe.host_mesh_named(host_mesh, name)
            root.start_worker_collector.call_one(host_mesh).get()
        port = self.config.dashboard_port if self.config.include_dashboard else 0
        self.server = TelemetryServer(QueryEngine(root), root, port=port)
        self._link_admin(True)
        if self.config.snapshot_interval_secs:
            from monarch._src.job.telemetry_snapshots import SnapshotTimer

            self.snapshots = SnapshotTimer(float(self.config.snapshot_interval_secs))

    def mount_dashboard(self, admin_url: str | None) -> str:
        """Serve the dashboard on the running server (once, announcing its URL on stdout as
        torchmonarch does); its URL. `admin_url`, the mesh admin API's (token included), backs
        the triage and py-spy buttons."""
        if self.dashboard_url is None:
            from monarch._src.dashboard import mount, rows_of

            server = self.server
            if server is None:
                raise RuntimeError("Telemetry.mount_dashboard needs the telemetry started first.")
            root = server.root

            def store_pyspy(dump_id: str, proc_ref: str, result_json: str) -> Any:
                return root.store_pyspy_dump.call_one(dump_id, proc_ref, result_json).get(
                    timeout=30.0)

            mount(server, rows_of(server.engine.query), admin_url, store_pyspy)
            self.dashboard_url = server.url
            print(f"Monarch Dashboard: {self.dashboard_url}")  # once, as torchmonarch does
        assert self.dashboard_url is not None
        return self.dashboard_url

    def _link_admin(self, on: bool) -> None:
        """The admin API's `/v1/admin` names this telemetry, and its `POST /v1/query` runs SQL
        through it (as torchmonarch's admin does). The admin server is one per process: with
        several jobs' telemetry here it serves the latest started still running."""
        from monarch._src.admin import http as admin_http
        from monarch._src.job.telemetry_query import json_rows

        if self in _LINKED:
            _LINKED.remove(self)
        if on:
            _LINKED.append(self)
        if not _LINKED:
            admin_http.set_query_handler(None)
            admin_http.set_telemetry_url(None)
            return
        server = _LINKED[-1].server
        engine = server.engine

        def query(body: dict[str, Any]) -> dict[str, Any]:
            sql = body.get("sql")
            if not isinstance(sql, str):
                raise ValueError('expected a JSON body {"sql": "SELECT ..."}')
            return {"rows": json_rows(engine.query(sql))}

        admin_http.set_query_handler(query)
        admin_http.set_telemetry_url(server.url)

    def stop(self) -> None:
        """Stop the snapshots, the API server, the worker collectors and this process's sink."""
        if self.snapshots is not None:
            self.snapshots.stop()
            self.snapshots = None
        if self.server is not None:
            self._link_admin(False)
        if self.server is not None:
            self.server.close()
            self.server = None
            self.dashboard_url = None
        root, self.root = self.root, None
        if root is not None:
            try:
                root.stop_worker_collectors.call_one().get(timeout=10.0)
                root.stop("telemetry stopped").get(timeout=10.0)
            except Exception:
                logger.info("stopping the telemetry collectors failed", exc_info=True)
        metrics.stop()
        record.uninstall()
