"""The mesh as a tree of nodes (root, hosts, procs, actors), in the JSON shapes of Monarch's
mesh admin API, for the HTTP routes of `http.py`.

Every node has a reference string; `GET /v1/{url-encoded reference}` returns its
`NodePayload`: `{"identity", "properties": {"Root"|"Host"|"Proc"|"Actor": {...}}, "children",
"parent", "as_of"}`. The references are ours (Monarch's are Rust actor ids):

* `root`;
* `host:<host name>` for each host that runs procs of this client (and the client's own);
* `<proc id>@<address>` for each proc, the client included (`client-<pid>-<hex>@tcp://...`);
* `<actor mesh key>[<rank>].<proc reference>` for each actor (`worker-1a2b[0].client-...`).

The tree is rebuilt from the runtime at each request: the host agents' proc tables (which procs
run where, which failed or stopped, which actor meshes this client spawned on them) and, for the
proc or actor asked about, that proc's `introspect` answer (its actors, in-flight calls, queue
depth, memory). A proc that does not answer in time still has its node, marked unreachable.
Failure times are when this process (or the failed actor's proc) first saw the failure.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Topology", "actor_state", "iso", "started"]

_INTROSPECT_TIMEOUT = 3.0  # seconds a proc has to answer before its node says unreachable
_STOPPED_RETENTION = 100  # stopped actors listed per proc (Monarch's cap)
started = time.time()  # when this process's admin view began (the root's `started_at`)
_failed_seen: dict[tuple[str, int], float] = {}  # (actor mesh key, rank) -> first seen failed
_failed_lock = threading.Lock()


def iso(t: float | None) -> str | None:
    """`t` (epoch seconds) as an ISO 8601 UTC timestamp with milliseconds, Monarch's format."""
    if t is None:
        return None
    ms = int((t - int(t)) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{ms:03d}Z"


@dataclass
class ActorNode:
    """An actor as the root's proc tables know it (a mesh this client spawned), or as its proc
    reported it (`info`), or both."""

    key: str  # the actor mesh's key
    name: str  # the mesh's spawn name
    rank: int  # rank within its mesh
    display: str = ""
    state: str = "running"  # running, failed, stopped (from the root's view, when it has one)
    report: str = ""  # the failure or stop report
    info: dict[str, Any] | None = None  # the proc's introspect entry


@dataclass
class ProcNode:
    """One proc (or the client process): where it runs and what the root knows of it."""

    ref: str
    host: str
    proc_id: str
    address: str
    mesh: str  # the proc mesh's name ("client" for the client)
    rank: int
    pid: int | None
    state: str  # starting, running, failed, stopped
    detail: str
    actors: dict[str, ActorNode] = field(default_factory=dict)  # by actor mesh key
    answer: dict[str, Any] | None = None  # its introspect answer, once asked
    error: str = ""  # why it did not answer


class Topology:
    """One reading of the client's mesh, built at a request (see the module docstring)."""

    def __init__(self, timeout: float = _INTROSPECT_TIMEOUT) -> None:
        from monarch._src.admin.model import _placed_tables
        from monarch._src.lowlevel import actor_rank_state, get_runtime, proc_rank_state

        rt = get_runtime()
        self.timeout = timeout  # seconds each proc has to answer `ask`
        self.local_host = socket.gethostname()
        self.hosts: dict[str, list[str]] = {self.local_host: []}  # host -> proc refs
        self.procs: dict[str, ProcNode] = {}
        client = ProcNode(f"{rt.proc_id}@{rt.address}", self.local_host, rt.proc_id, rt.address,
                          "client", 0, os.getpid(), "running", "")
        self._add(client)
        self.client = client  # the client process's node (its actors: controllers)
        now = time.time()
        for table, hosts in _placed_tables():
            refs: list[str] = []  # the proc references of this table, by rank
            for rank, key in enumerate(table.keys):
                proc_id = table.proc_ids[rank] if rank < len(table.proc_ids) else \
                    f"{table.name}-{rank}"
                address = key if table.is_up(rank) else ""
                st = proc_rank_state(table, rank)
                node = ProcNode(f"{proc_id}@{address or key}", hosts[rank], proc_id, address,
                                table.name, rank, table.pids[rank], st.state.value, st.detail)
                self._add(node)
                refs.append(node.ref)
            for mesh_key, name, _creator, ranks in list(table.actor_meshes):
                display = table.actor_displays.get(mesh_key, ("", (), ()))[0]
                for rank, proc_rank in enumerate(ranks):
                    ast = actor_rank_state(table, mesh_key, rank, proc_rank)
                    actor = ActorNode(mesh_key, name, rank, display + ">" if display else "",
                                      ast.state.value, ast.detail)
                    if ast.state.value in ("failed", "stopped"):
                        with _failed_lock:
                            _failed_seen.setdefault((mesh_key, rank), now)
                    self.procs[refs[proc_rank]].actors[mesh_key] = actor

    def _add(self, node: ProcNode) -> None:
        self.procs[node.ref] = node
        self.hosts.setdefault(node.host, []).append(node.ref)

    # -- asking procs -------------------------------------------------------------------------

    def ask(self, proc: ProcNode, frames: bool = False) -> dict[str, Any] | None:
        """The proc's introspect answer (cached on the node); None when it cannot answer."""
        if proc.answer is not None and not frames:
            return proc.answer
        if proc.state in ("failed", "stopped") or not proc.address:
            proc.error = f"the proc is {proc.state}"
            return None
        from monarch._src.admin.introspect import introspect

        try:
            proc.answer = introspect(proc.address, frames=frames, timeout=self.timeout)
        except (TimeoutError, RuntimeError, OSError, ValueError) as exc:
            proc.error = str(exc)
            return None
        for entry in proc.answer["actors"]:
            actor = proc.actors.get(entry["key"])
            if actor is None:
                actor = proc.actors[entry["key"]] = ActorNode(
                    entry["key"], entry["name"], int(entry["rank"]), entry["display"])
            actor.info = entry
            if not actor.display:
                actor.display = entry["display"]
        return proc.answer

    # -- references ---------------------------------------------------------------------------

    def actor_ref(self, proc: ProcNode, actor: ActorNode) -> str:
        return f"{actor.key}[{actor.rank}].{proc.ref}"

    def find_actor(self, ref: str) -> tuple[ProcNode, ActorNode] | None:
        for proc_ref, proc in self.procs.items():
            if not ref.endswith("." + proc_ref):
                continue
            head = ref[: -len(proc_ref) - 1]
            if proc.answer is None:
                self.ask(proc)
            for actor in proc.actors.values():
                if f"{actor.key}[{actor.rank}]" == head:
                    return proc, actor
        return None

    # -- payloads -----------------------------------------------------------------------------

    def _payload(self, identity: str, kind: str, props: dict[str, Any], children: list[str],
                 parent: str | None) -> dict[str, Any]:
        return {"identity": identity, "properties": {kind: props}, "children": children,
                "parent": parent, "as_of": iso(time.time())}

    def root(self) -> dict[str, Any]:
        refs = [f"host:{h}" for h, procs in self.hosts.items() if procs]
        return self._payload("root", "Root", {
            "num_hosts": len(refs), "started_at": iso(started), "started_by": _user(),
            "system_children": []}, refs, None)

    def resolve(self, ref: str) -> dict[str, Any] | None:
        """The payload of the node `ref`; None if there is no such node."""
        if ref == "root":
            return self.root()
        if ref.startswith("host:") and ref[5:] in self.hosts:
            return self._host(ref[5:])
        proc = self.procs.get(ref)
        if proc is not None:
            return self._proc(proc)
        found = self.find_actor(ref)
        if found is not None:
            return self._actor(*found)
        return None

    def _host(self, host: str) -> dict[str, Any]:
        refs = self.hosts[host]
        rss = _rss() if host == self.local_host else 0
        return self._payload(f"host:{host}", "Host", {
            "addr": host, "num_procs": len(refs), "system_children": [],
            "memory": {"process_rss_bytes": rss,
                       "process_vm_size_bytes": _vm() if host == self.local_host else 0}},
            list(refs), "root")

    def _proc(self, proc: ProcNode) -> dict[str, Any]:
        answer = self.ask(proc)
        actors = list(proc.actors.values())
        ended = [a for a in actors if actor_state(a) in ("failed", "stopped")]
        failed = [a for a in actors if actor_state(a) == "failed"]
        depths = [int(a.info["queue_depth"]) for a in actors if a.info is not None]
        props: dict[str, Any] = {
            "proc_name": proc.proc_id,
            "num_actors": len(actors) - len(ended),
            "system_children": [],
            "stopped_children": [self.actor_ref(proc, a) for a in ended][:_STOPPED_RETENTION],
            "stopped_retention_cap": _STOPPED_RETENTION,
            "is_poisoned": bool(failed),
            "failed_actor_count": len(failed),
            "debug": {
                "memory": {"process_rss_bytes": int(answer["rss_bytes"]) if answer else 0,
                           "process_vm_size_bytes": 0},
                "actor_work_queue_depth_total": sum(depths),
                "actor_work_queue_depth_max": max(depths, default=0),
            },
            # Ours (not in Monarch's payload): the proc's own state, pid, mesh and reachability.
            "state": proc.state, "detail": proc.detail, "pid": proc.pid, "mesh": proc.mesh,
            "rank": proc.rank, "address": proc.address, "reachable": answer is not None,
            "unreachable_reason": proc.error,
        }
        return self._payload(proc.ref, "Proc", props,
                             [self.actor_ref(proc, a) for a in actors], f"host:{proc.host}")

    def _actor(self, proc: ProcNode, actor: ActorNode) -> dict[str, Any]:
        info = actor.info or {}
        state = actor_state(actor)
        report = actor.report or str(info.get("failure") or "")
        in_flight: list[dict[str, Any]] = list(info.get("in_flight", []))
        if state in ("failed", "stopped"):
            status = f"{state}: {report}" if report else state
        else:
            status = "processing" if in_flight else "idle"
        failure_info = None
        if state == "failed":
            with _failed_lock:
                seen = _failed_seen.get((actor.key, actor.rank))
            at = min(t for t in (seen, info.get("failed_at"), time.time()) if t is not None)
            failure_info = {"error_message": report,
                            "root_cause_actor": self.actor_ref(proc, actor),
                            "root_cause_name": actor.display or None, "occurred_at": iso(at),
                            "is_propagated": False}
        handlers: dict[str, list[float]] = {}
        for call in in_flight:
            handlers.setdefault(str(call["method"]), []).append(float(call["since"]))
        props = {
            "actor_status": status,
            "actor_type": _class_of(actor.display),
            "instance_id": f"{actor.key}[{actor.rank}]",
            "messages_processed": _answered(actor),
            "created_at": None,
            "last_message_handler": None,
            "total_processing_time_us": 0,
            "queue_depth": int(info.get("queue_depth", 0)),
            "flight_recorder": None,
            "is_system": False,
            "inbound_ordering": None,
            "failure_info": failure_info,
            "execution": None if actor.info is None else {
                "active_count": len(in_flight),
                "active_handlers": [
                    {"name": name, "active_count": len(starts), "oldest_since": iso(min(starts))}
                    for name, starts in sorted(handlers.items(), key=lambda kv: min(kv[1]))],
                "complete": True, "truncated": False},
            # Ours: the mesh name and rank, and each call in flight with its age in seconds.
            "mesh": actor.name, "rank": actor.rank, "display": actor.display,
            "in_flight": [{"method": c["method"], "since": iso(float(c["since"])),
                           "age_s": round(time.time() - float(c["since"]), 3)}
                          for c in in_flight],
        }
        return self._payload(self.actor_ref(proc, actor), "Actor", props, [], proc.ref)

    def every_ref(self) -> list[tuple[str, str]]:
        """(kind, reference) of every node, root first, depth first (procs are asked)."""
        out = [("root", "root")]
        for host, refs in self.hosts.items():
            if not refs:
                continue
            out.append(("host", f"host:{host}"))
            for ref in refs:
                proc = self.procs[ref]
                out.append(("proc", ref))
                self.ask(proc)
                out += [("actor", self.actor_ref(proc, a)) for a in proc.actors.values()]
        return out


def actor_state(actor: ActorNode) -> str:
    """running, failed or stopped: the root's view, else what the actor's proc reported."""
    if actor.state in ("failed", "stopped"):
        return actor.state
    ended = actor.info.get("ended") if actor.info else None
    return str(ended) if ended else actor.state  # its proc knows (a mesh the root forgot)


def _class_of(display: str) -> str:
    """`module.Class` from a display name "<creator>.<module.Class name{...}>"."""
    inner = display.rsplit(".<", 1)[-1].lstrip("<")
    return inner.split(" ", 1)[0] if inner else "unknown"


def _answered(actor: ActorNode) -> int:
    from monarch._src.mesh import traffic

    return int(traffic.answered[(actor.key, actor.rank)])


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0  # not Linux


def _vm() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0  # not Linux
