"""Periodic mesh snapshots into the telemetry tables (`TelemetryConfig.snapshot_interval_secs`).

Every interval the client reads its mesh as the admin API does (`admin.nodes.Topology`: root,
hosts, procs and their actors, each proc asked for its live state) and records it as one
snapshot, in torchmonarch's relational shape: `snapshots` (id, time), `nodes` (every node with
its kind), `children` (the tree's edges), and a table per kind (`root_nodes`, `host_nodes`,
`proc_nodes`, `actor_nodes`), with `actor_failures`, `actor_executions` and `active_handlers` for
the actors that failed or are running handlers, and `resolution_errors` for the procs that did
not answer. Node ids are the admin API's references, so a snapshot row leads to `/v1/{ref}`.
The ordering tables (`actor_inbound_orderings`, `ordering_sessions`) stay empty: this runtime
keeps no per-sender ordering sessions.

The first snapshot is taken one interval after telemetry starts. A capture that fails is
logged and the next one tried; nothing here blocks the caller's thread.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import datetime
from typing import Any

from monarch._src.telemetry import record

__all__ = ["SnapshotTimer", "capture"]

logger = logging.getLogger(__name__)


def _us(text: str | None) -> int | None:
    """An admin payload's ISO time as epoch microseconds."""
    if not text:
        return None
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1_000_000)


def capture(timeout: float = 3.0) -> list[list[Any]]:
    """One snapshot of the client's mesh as `[table, row]` pairs (see the module doc)."""
    from monarch._src.admin.nodes import Topology

    topo = Topology(timeout=timeout)
    sid = uuid.uuid4().hex
    now = record.now_us()
    rows: list[list[Any]] = [["snapshots", {"snapshot_id": sid, "snapshot_ts": now}]]

    def node(ref: str, kind: str) -> None:
        rows.append(["nodes", {"snapshot_id": sid, "node_id": ref, "node_kind": kind,
                               "as_of": now}])

    def child(parent: str, ref: str, order: int, stopped: bool = False) -> None:
        rows.append(["children", {"snapshot_id": sid, "parent_id": parent, "child_id": ref,
                                  "child_sort_key": order, "is_system": False,
                                  "is_stopped": stopped}])

    root = topo.root()["properties"]["Root"]
    node("root", "root")
    rows.append(["root_nodes", {"snapshot_id": sid, "node_id": "root",
                                "num_hosts": root["num_hosts"],
                                "started_at": _us(root["started_at"]) or now,
                                "started_by": root["started_by"]}])
    host_order = 0
    for host, refs in topo.hosts.items():
        if not refs:
            continue
        host_ref = f"host:{host}"
        node(host_ref, "host")
        child("root", host_ref, host_order)
        host_order += 1
        rows.append(["host_nodes", {"snapshot_id": sid, "node_id": host_ref, "addr": host,
                                    "host_num_procs": len(refs)}])
        for proc_order, ref in enumerate(refs):
            rows += _proc_rows(topo, sid, ref, host_ref, proc_order, node, child)
    return rows


def _proc_rows(topo: Any, sid: str, ref: str, host_ref: str, order: int, node: Any,
               child: Any) -> list[list[Any]]:
    rows: list[list[Any]] = []
    proc = topo.procs[ref]
    payload = topo.resolve(ref)["properties"]["Proc"]
    node(ref, "proc")
    child(host_ref, ref, order)
    rows.append(["proc_nodes", {"snapshot_id": sid, "node_id": ref,
                                "proc_name": payload["proc_name"],
                                "num_actors": payload["num_actors"],
                                "stopped_retention_cap": payload["stopped_retention_cap"],
                                "is_poisoned": payload["is_poisoned"],
                                "failed_actor_count": payload["failed_actor_count"]}])
    if not payload["reachable"] and proc.state not in ("failed", "stopped"):
        rows.append(["resolution_errors", {"snapshot_id": sid, "node_id": ref,
                                           "error_code": "unreachable",
                                           "error_message": payload["unreachable_reason"] or
                                           "the proc did not answer"}])
    for actor_order, actor in enumerate(list(proc.actors.values())):
        actor_ref = topo.actor_ref(proc, actor)
        props = topo.resolve(actor_ref)["properties"]["Actor"]
        stopped = props["actor_status"].startswith(("stopped", "failed"))
        node(actor_ref, "actor")
        child(ref, actor_ref, actor_order, stopped)
        rows.append(["actor_nodes", {
            "snapshot_id": sid, "node_id": actor_ref, "actor_status": props["actor_status"],
            "actor_type": props["actor_type"], "instance_id": props["instance_id"],
            "messages_processed": props["messages_processed"],
            "created_at": _us(props["created_at"]),
            "last_message_handler": props["last_message_handler"],
            "total_processing_time_us": props["total_processing_time_us"],
            "queue_depth": props["queue_depth"], "is_system": props["is_system"]}])
        failure = props["failure_info"]
        if failure is not None:
            rows.append(["actor_failures", {
                "snapshot_id": sid, "node_id": actor_ref,
                "failure_error_message": failure["error_message"],
                "failure_root_cause_actor": failure["root_cause_actor"],
                "failure_root_cause_name": failure["root_cause_name"],
                "failure_occurred_at": _us(failure["occurred_at"]) or record.now_us(),
                "failure_is_propagated": failure["is_propagated"]}])
        execution = props["execution"]
        if execution is not None:
            rows.append(["actor_executions", {
                "snapshot_id": sid, "node_id": actor_ref,
                "active_count": execution["active_count"], "complete": execution["complete"],
                "truncated": execution["truncated"]}])
            for handler in execution["active_handlers"]:
                rows.append(["active_handlers", {
                    "snapshot_id": sid, "node_id": actor_ref, "name": handler["name"],
                    "active_count": handler["active_count"],
                    "oldest_since": _us(handler["oldest_since"]) or record.now_us()}])
    return rows


class SnapshotTimer:
    """Records a snapshot every `interval` seconds on a daemon thread until `stop()`."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.taken = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monarch-telemetry-snapshots",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            started = time.monotonic()
            try:
                for table, row in capture():
                    record.emit(table, row)
                self.taken += 1
            except Exception:
                logger.warning("a telemetry mesh snapshot failed; the next one is in %ss",
                               self.interval, exc_info=True)
            logger.debug("telemetry snapshot took %.3fs", time.monotonic() - started)

    def stop(self) -> None:
        self._stop.set()
