"""The admin view's data model: hosts, procs and actors with state, message rates and failures.

`collect()` reads, in the root client, what the runtime already keeps: the proc tables of every
live host agent (`mesh.host_agent.agents()`: the local one and every attached remote host; each
table with the host of each rank, the failed or stopped ranks and the actor meshes on each
proc), the state of each rank (`mesh.rank_state`, the one derivation the HTML reprs and the
notebook widgets use too), the per-rank message counters of `mesh/traffic.py`, and the actors
paused in a debugger (`set_paused_source`: the debug feature registers its controller's list,
so this package does not import the debugger). It returns plain JSON-ready dicts, so the same
snapshot feeds the notebook widget in-process and `monarch top` through the control server.

`AdminModel` turns successive snapshots into a view: message rates are count differences over
time, and failures are remembered (with when they were first seen) after their mesh is gone.
Only `collect()` and `find_proc()` import the runtime (lazily), so `monarch top`, which uses only
`AdminModel`, does not.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monarch._src.lowlevel import PlacedTable

__all__ = ["AdminModel", "PausedSource", "collect", "find_proc", "set_paused_source"]

Snapshot = dict[str, Any]
#: Lists the actors paused in a debugger, as (actor mesh name, rank) pairs.
PausedSource = Callable[[], Iterable[tuple[str, int]]]
_MAX_FAILURES = 20  # recent failures kept by an AdminModel
_paused_source: PausedSource | None = None


def set_paused_source(source: PausedSource | None) -> None:
    """Where `collect()` learns which actors are paused (shown as state "paused"); the debug
    controller registers itself here when it is made. None: no debugger, nothing paused."""
    global _paused_source
    _paused_source = source


def _placed_tables() -> list[PlacedTable]:
    """Every live proc table this process started, with the host of each rank: on this
    machine, and on remote hosts attached with `attach_to_workers` / `hosts_from_dask`."""
    from monarch._src.lowlevel import agents

    return [placed for agent in agents() for placed in agent.snapshot()]


def collect() -> Snapshot:
    """A snapshot of this client's hosts, procs and actors (plain dicts and lists)."""
    from monarch._src.lowlevel import Health, actor_rank_state, proc_rank_state
    from monarch._src.mesh import traffic

    source = _paused_source
    paused = set(source()) if source is not None else set()
    procs: list[dict[str, Any]] = []
    actors: list[dict[str, Any]] = []
    for table, hosts in _placed_tables():
        for rank, key in enumerate(table.keys):
            proc = proc_rank_state(table, rank)
            procs.append({"mesh": table.name, "rank": rank, "host": hosts[rank],
                          "pid": table.pids[rank],
                          "address": key if table.is_up(rank) else "",
                          "state": proc.state.value, "detail": proc.detail})
        for mesh_key, name, _creator, ranks in list(table.actor_meshes):
            for rank, proc_rank in enumerate(ranks):
                actor = actor_rank_state(table, mesh_key, rank, proc_rank)
                state, detail = actor.state.value, actor.detail
                if actor.state is Health.RUNNING and (name, rank) in paused:
                    state, detail = "paused", "in the debugger"
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
    from monarch._src.lowlevel import Health, get_runtime, proc_rank_state

    if mesh in ("client", "root"):
        return get_runtime().address
    names: list[str] = []
    for table, _hosts in _placed_tables():
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
            if not table.is_up(ranks[rank]):
                raise RuntimeError(f"Rank {rank} of mesh {mesh} has not started yet; try again.")
            proc = proc_rank_state(table, ranks[rank])
            if proc.state in (Health.FAILED, Health.STOPPED):
                raise RuntimeError(f"Rank {rank} of mesh {mesh} is {proc.state.value}: "
                                   f"{proc.detail}")
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
