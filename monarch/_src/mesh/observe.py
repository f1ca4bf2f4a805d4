"""What the mesh layer records into a job's telemetry (`monarch._src.telemetry.record`).

Every function here is called only while `record.SINK is not None` (the caller tests it first,
so a process without telemetry pays one global read per event site). Who writes what:

* the spawner (client or actor), `proc_mesh_spawned` / `actor_mesh_spawned`: a `meshes` row per
  proc mesh (class "Proc", parent: its host mesh) and per actor mesh (class
  "Python<ClassName>", parent: its proc mesh, `parent_view_json`: the proc view spawned on), and
  one `proc_agent` actor per proc once the procs are up;
* the caller, `cast_sent`: a `sent_messages` row per cast (the view cast to), and the caller's
  actor id, which travels in the CALL (`Call.origin`) so the receiver's `messages` row names
  its sender;
* the proc hosting an actor: its `actors` row and status events (Created, Initializing, Idle,
  Stopping, Stopped, Failed with the reason), and per message a `messages` row (when its handler
  starts) with `message_status_events` queued / active / complete or failed;
* the job's telemetry start (`client_started`, `host_mesh_named`): the client's own host, proc
  and root actor (display name "<root>", status Client), and each host mesh of the job with its
  host agents.

Ids: an actor is `stable_id` of its full name, a mesh of its full name (an actor mesh's full
name is its routing key, `name-<hex>`; a proc mesh's its id), so each process computes them
alone. JSON columns follow Monarch's: an extent is `{"inner": {"labels", "sizes"}}`, a view
`{"labels", "slice": {"offset", "sizes", "strides"}}`.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Callable
from typing import Any

from monarch._src.mesh.context import current_instance, instance_of
from monarch._src.shape import Shape
from monarch._src.telemetry import metrics, record

__all__ = [
    "ProcTelemetry",
    "actor_created",
    "actor_failed",
    "actor_mesh_spawned",
    "actor_status",
    "cast_sent",
    "client_started",
    "host_mesh_named",
    "instance_id",
    "message_queued",
    "proc_mesh_spawned",
    "record_handler",
    "root_status",
]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def extent_json(labels: list[str], sizes: list[int]) -> str:
    return _dumps({"inner": {"labels": list(labels), "sizes": list(sizes)}})


def view_json(shape: Shape) -> str:
    nd = shape.ndslice
    return _dumps({"labels": list(shape.labels),
                   "slice": {"offset": nd.offset, "sizes": list(nd.sizes),
                             "strides": list(nd.strides)}})


def _mesh_row(mesh_class: str, given: str, full: str, labels: list[str], sizes: list[int],
              parent: int | None, parent_view: str | None) -> int:
    mesh_id = record.stable_id(full)
    record.emit("meshes", {
        "id": mesh_id, "timestamp_us": record.now_us(), "class": mesh_class,
        "given_name": given, "full_name": full, "shape_json": extent_json(labels, sizes),
        "parent_mesh_id": parent, "parent_view_json": parent_view,
    })
    return mesh_id


def _actor_row(full_name: str, mesh_id: int, rank: int, display: str | None,
               statuses: tuple[str, ...] = ("Created",)) -> int:
    actor_id = record.stable_id(full_name)
    now = record.now_us()
    record.emit("actors", {"id": actor_id, "timestamp_us": now, "mesh_id": mesh_id,
                           "rank": rank, "full_name": full_name, "display_name": display})
    for status in statuses:
        _status_row(actor_id, status, None, now)
    return actor_id


def _status_row(actor_id: int, status: str, reason: str | None, now: int | None = None) -> None:
    record.emit("actor_status_events", {"id": record.random_id(),
                                        "timestamp_us": now or record.now_us(),
                                        "actor_id": actor_id, "new_status": status,
                                        "reason": reason})


# ---- identities ------------------------------------------------------------------------------

def actor_label(actor_key: str | None, rank: int) -> str:
    """The actor part of a full name: "client" for the root client, else `key[rank]`."""
    return "client" if actor_key is None else f"{actor_key}[{rank}]"


def instance_id(inst: Any) -> int:
    """The telemetry id of actor instance `inst` (cached on it)."""
    cached: int | None = getattr(inst, "_telemetry_id", None)
    if cached is None:
        from monarch._src.runtime.runtime import get_runtime

        full = record.actor_full_name(actor_label(inst.actor_key, inst.rank.rank), inst.proc_id,
                                      get_runtime().address)
        cached = inst._telemetry_id = record.stable_id(full)
    return cached


# ---- the job's start -------------------------------------------------------------------------

def client_started(inst: Any, address: str, proc_id: str) -> None:
    """The client process's own host, proc and root actor (status Created, then Client)."""
    host = _mesh_row("Host", "local", f"local-{record.proc_label(proc_id)}", ["hosts"], [1],
                     None, None)
    proc = _mesh_row("Proc", "local", proc_id, [], [], host, None)
    client = _mesh_row("Python<RootClientActor>", "client", f"client-{proc_id}", [], [], proc,
                       None)
    _actor_row(record.actor_full_name("host_agent", proc_id, address), host, 0, None)
    _actor_row(record.actor_full_name("proc_agent", proc_id, address), proc, 0, None)
    full = record.actor_full_name("client", proc_id, address)
    inst._telemetry_id = _actor_row(full, client, 0, "<root>", ("Created", "Client"))


def host_mesh_named(host_mesh: Any, given_name: str) -> int:
    """Record job host mesh `host_mesh` as `given_name`, with one host agent per host (its
    location `host://<name>_<rank>`: the host agents' own addresses are the hosts layer's)."""
    state = host_mesh._state
    full = state.telemetry_name
    if full is None:
        import uuid

        full = state.telemetry_name = f"{given_name}-{uuid.uuid4().hex[:10]}"
    shape = host_mesh._mesh_shape
    mesh_id = _mesh_row("Host", given_name, full, list(shape.labels),
                        list(shape.ndslice.sizes), None, None)
    for rank in range(len(host_mesh)):
        _actor_row(record.actor_full_name("host_agent", f"{full}_{rank}",
                                          f"host:{given_name}_{rank}"), mesh_id, rank, None)
    return mesh_id


def _host_mesh_id(host_mesh: Any) -> int | None:
    full = host_mesh._state.telemetry_name if host_mesh is not None else None
    return record.stable_id(full) if full is not None else None


# ---- the spawner -----------------------------------------------------------------------------

class ProcTelemetry:
    """A new proc's start-up step: send its rows to `path` (the host-local collector)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> None:
        from monarch._src.runtime.runtime import get_runtime

        record.install(self.path)
        metrics.start(f"monarch-proc-{get_runtime().proc_id}")


def proc_mesh_spawned(pm: Any, host_mesh: Any, table: Any) -> None:
    """Record proc mesh `pm` (spawned on `host_mesh`), and its procs' agents once they are up."""
    shape = pm._mesh_shape
    mesh_id = _mesh_row("Proc", table.name, pm._id, list(shape.labels),
                        list(shape.ndslice.sizes), _host_mesh_id(host_mesh), None)

    def up(ready: Any) -> None:
        if ready.cancelled() or ready.exception() is not None or record.SINK is None:
            return
        ids = table.proc_ids  # empty for procs a served host started: named by mesh and rank
        for rank, addr in enumerate(table.keys):
            proc_id = ids[rank] if rank < len(ids) else f"{pm._id}_{rank}"
            _actor_row(record.actor_full_name("proc_agent", proc_id, addr), mesh_id, rank, None,
                       ("Created", "Idle"))

    table.ready.add_done_callback(up)


def actor_mesh_spawned(key: str, name: str, cls: type, proc_view: Any) -> None:
    """Record actor mesh `key` (`name`, of `cls`) spawned on the proc mesh view `proc_view`."""
    shape = proc_view._mesh_shape
    _mesh_row(f"Python<{cls.__name__}>", name, key, list(shape.labels),
              list(shape.ndslice.sizes), record.stable_id(proc_view._id), view_json(shape))


def cast_sent(sender: Any, actor_key: str, view: Shape) -> int:
    """Record a cast from actor instance `sender` to the `view` of actor mesh `actor_key`;
    the sender's id (for the CALLs' `origin`)."""
    sender_id = instance_id(sender)
    metrics.message_posted(str(sender_id), actor_key)
    vj = view_json(view)
    record.emit("sent_messages", {"id": record.random_id(), "timestamp_us": record.now_us(),
                                  "sender_actor_id": sender_id,
                                  "actor_mesh_id": record.stable_id(actor_key),
                                  "view_json": vj, "shape_json": vj})
    return sender_id


# ---- the proc hosting an actor ---------------------------------------------------------------

def actor_created(hosted: Any, address: str) -> int:
    """The `actors` row of hosted actor `hosted` (status Created); its id."""
    info = hosted.info
    full = record.actor_full_name(actor_label(info.actor_key, info.rank), hosted.proc_id, address)
    return _actor_row(full, record.stable_id(info.actor_key), info.rank, hosted._display)


def actor_status(actor_id: int, status: str, reason: str | None = None) -> None:
    _status_row(actor_id, status, reason)


def root_status(status: str) -> int:
    """Record the root client's new `status`; its id."""
    root = instance_of(None) or current_instance()
    actor_id = instance_id(root)
    _status_row(actor_id, status, None)
    return actor_id


def _message_status(message_id: int, status: str, now: int | None = None) -> None:
    record.emit("message_status_events", {"id": record.random_id(),
                                          "timestamp_us": now or record.now_us(),
                                          "message_id": message_id, "status": status})


def _handler_end(message_id: int, actor: str, method: str, began: float, ok: bool) -> None:
    _message_status(message_id, "complete" if ok else "failed")
    metrics.handler_done(actor, method, time.monotonic() - began, ok)


def message_queued(actor_id: int) -> int:
    """A CALL reached the queue of actor `actor_id`: its `queued` time."""
    metrics.message_queued(str(actor_id))
    return record.now_us()


def actor_failed(actor_id: int, report: str) -> None:
    """Actor `actor_id` failed with `report`: Stopping, then Failed."""
    _status_row(actor_id, "Stopping", None)
    _status_row(actor_id, "Failed", report)
    metrics.actor_failed(str(actor_id))


def record_handler(fn: Callable[..., Any], actor_id: int, origin: int | None, method: str,
                   queued_us: int | None) -> Callable[..., Any]:
    """`fn` (an endpoint's bound method) recording its message: the `messages` row and the
    queued / active events when it starts, complete or failed when it ends."""

    actor = str(actor_id)

    def start() -> int:
        message_id = record.random_id()
        now = record.now_us()
        metrics.message_dequeued(actor)
        record.emit("messages", {"id": message_id, "timestamp_us": now,
                                 "from_actor_id": origin or 0, "to_actor_id": actor_id,
                                 "endpoint": method,
                                 "port_index": record.stable_id(f"{actor_id}/{method}")})
        _message_status(message_id, "queued", queued_us or now)
        _message_status(message_id, "active", now)
        return message_id

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def recorded_async(*args: Any, **kwargs: Any) -> Any:
            message_id = start()
            began = time.monotonic()
            try:
                result = await fn(*args, **kwargs)
            except BaseException:
                _handler_end(message_id, actor, method, began, False)
                raise
            _handler_end(message_id, actor, method, began, True)
            return result

        return recorded_async

    @functools.wraps(fn)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        message_id = start()
        began = time.monotonic()
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            _handler_end(message_id, actor, method, began, False)
            raise
        _handler_end(message_id, actor, method, began, True)
        return result

    return recorded
