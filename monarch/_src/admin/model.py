"""The admin view's data model: hosts, procs and actors with state, message rates and failures.

`collect()` reads, in the root client, what the runtime already keeps: the proc tables of the
local host agent and of every attached remote host agent (address, host, pid, failed or stopped
ranks, the actor meshes on each proc), the ownership
tree (the health of each actor rank), the per-rank message counters of `mesh/traffic.py`, and the
debug controller's paused actors. It returns plain JSON-ready dicts, so the same snapshot feeds
the notebook widget in-process and `monarch top` through the control server.

`AdminModel` turns successive snapshots into a view: message rates are count differences over
time, and failures are remembered (with when they were first seen) after their mesh is gone.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from typing import Any, Callable

__all__ = ["AdminModel", "collect", "find_proc"]

Snapshot = dict[str, Any]
# Routing key prefix of procs not started yet (runtime/mailbox.py); kept here so that `monarch
# top`, which uses only `AdminModel`, does not import the runtime.
PENDING_PREFIX = "pending:"
_MAX_FAILURES = 20  # recent failures kept by an AdminModel


def _tables() -> list[tuple[Any, list[str]]]:
    """(proc table, host of each rank) for every proc table this process started: on this
    machine, and on remote hosts attached with `attach_to_workers` / `hosts_from_dask`."""
    from monarch._src.hosts import local, remote_agent

    found: list[tuple[Any, list[str]]] = []
    agent = local._agent
    if agent is not None:
        here = socket.gethostname()
        with agent._lock:
            found += [(t, [here] * len(t.keys)) for t in agent._tables]
    remotes = {id(a): a for agents in list(remote_agent._agents_by_host.values()) for a in agents}
    for remote in remotes.values():
        with remote._lock:
            placed = list(remote._tables.values())
        for table, where in placed:
            found.append((table, [remote.hosts[h].label for h in where.host_of_rank]))
    return found


def _proc_state(table: Any, rank: int) -> tuple[str, str]:
    if rank in table.failed:
        return "failed", table.failed[rank]
    if table.stopped is not None:
        return "stopped", table.stopped
    if table.keys[rank].startswith(PENDING_PREFIX):
        return "starting", ""
    return "running", ""


def _paused() -> set[tuple[str, int]]:
    from monarch._src.debug import controller

    if controller._controller is None:
        return set()
    return {(s.name, s.rank) for s in controller._controller.sessions()}


def collect() -> Snapshot:
    """A snapshot of this client's hosts, procs and actors (plain dicts and lists)."""
    from monarch._src.mesh import traffic
    from monarch._src.mesh.ownership import tree

    paused = _paused()
    procs: list[dict[str, Any]] = []
    actors: list[dict[str, Any]] = []
    for table, hosts in _tables():
        for rank, key in enumerate(table.keys):
            state, detail = _proc_state(table, rank)
            procs.append({"mesh": table.name, "rank": rank, "host": hosts[rank],
                          "pid": table.pids[rank],
                          "address": "" if key.startswith(PENDING_PREFIX) else key,
                          "state": state, "detail": detail})
        for mesh_key, name, _creator, ranks in list(table.actor_meshes):
            status = tree.status(mesh_key)
            stopped, failed = (status if status is not None else (False, {}))
            for rank, proc_rank in enumerate(ranks):
                proc_state, proc_detail = _proc_state(table, proc_rank)
                if rank in failed:
                    state, detail = "failed", failed[rank]
                elif stopped:
                    state, detail = "stopped", ""
                elif proc_state != "running":
                    state, detail = proc_state, proc_detail
                elif (name, rank) in paused:
                    state, detail = "paused", "in the debugger"
                else:
                    state, detail = "running", ""
                actors.append({
                    "mesh": name, "key": mesh_key, "rank": rank, "proc_mesh": table.name,
                    "proc_rank": proc_rank, "pid": table.pids[proc_rank], "state": state,
                    "detail": detail, "sent": traffic.sent[(mesh_key, rank)],
                    "answered": traffic.answered[(mesh_key, rank)],
                })
    failures = [{"kind": "proc", "mesh": p["mesh"], "rank": p["rank"], "report": p["detail"]}
                for p in procs if p["state"] == "failed"]
    failures += [{"kind": "actor", "mesh": a["mesh"], "rank": a["rank"], "report": a["detail"]}
                 for a in actors if a["state"] == "failed"]
    host_names = list(dict.fromkeys([socket.gethostname()] + [p["host"] for p in procs]))
    return {
        "time": time.time(),
        "hosts": [{"name": name, "procs": sum(1 for p in procs if p["host"] == name),
                   "running": sum(1 for p in procs
                                  if p["host"] == name and p["state"] == "running")}
                  for name in host_names],
        "procs": procs,
        "actors": actors,
        "failures": failures,
    }


def find_proc(mesh: str, rank: int) -> str:
    """The address of the proc behind rank `rank` of the actor or proc mesh called `mesh`
    (`client` is this process)."""
    from monarch._src.runtime.runtime import get_runtime

    if mesh in ("client", "root"):
        return get_runtime().address
    names: list[str] = []
    for table, _hosts in _tables():
        candidates: list[tuple[str, list[int]]] = [(table.name, list(range(len(table.keys))))]
        candidates += [(name, ranks) for _k, name, _c, ranks in list(table.actor_meshes)]
        for name, ranks in candidates:
            names.append(name)
            if name != mesh:
                continue
            if not 0 <= rank < len(ranks):
                raise ValueError(
                    f"Mesh {mesh} has no rank {rank}; its ranks are 0..{len(ranks) - 1}.")
            key = table.keys[ranks[rank]]
            if key.startswith(PENDING_PREFIX):
                raise RuntimeError(f"Rank {rank} of mesh {mesh} has not started yet; try again.")
            state, detail = _proc_state(table, ranks[rank])
            if state in ("failed", "stopped"):
                raise RuntimeError(f"Rank {rank} of mesh {mesh} is {state}: {detail}")
            return str(key)
    known = ", ".join(sorted(set(names))) or "none"
    raise LookupError(f"No mesh named {mesh!r} in this client (meshes: {known}, and 'client').")


class AdminModel:
    """Successive snapshots from `source` as a view with message rates and recent failures.

    `sample()` is called from one thread at a time (a refresh loop)."""

    def __init__(self, source: Callable[[], Snapshot] = collect) -> None:
        self._source = source
        self._last: dict[tuple[str, int], tuple[float, int, int]] = {}  # (key, rank) -> t, counts
        self.failures: deque[dict[str, Any]] = deque(maxlen=_MAX_FAILURES)  # newest last
        self._seen: set[tuple[str, str, int]] = set()  # failures already recorded

    def sample(self) -> Snapshot:
        """A fresh snapshot, with `rate_out`/`rate_in` (messages per second since the previous
        sample) on each actor and `recent_failures` (newest last)."""
        snap = self._source()
        now = float(snap["time"])
        last = self._last
        self._last = {}
        for actor in snap["actors"]:
            ident = (actor["key"], actor["rank"])
            sent, answered = int(actor["sent"]), int(actor["answered"])
            prev = last.get(ident)
            if prev is None or now <= prev[0]:
                actor["rate_out"] = actor["rate_in"] = 0.0
            else:
                dt = now - prev[0]
                actor["rate_out"] = max(0.0, (sent - prev[1]) / dt)
                actor["rate_in"] = max(0.0, (answered - prev[2]) / dt)
            self._last[ident] = (now, sent, answered)
        for failure in snap["failures"]:
            ident2 = (failure["kind"], failure["mesh"], failure["rank"])
            if ident2 not in self._seen:
                self._seen.add(ident2)
                self.failures.append({**failure, "time": now})
        snap["recent_failures"] = list(self.failures)
        return snap
