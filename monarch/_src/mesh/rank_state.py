"""One `RankState` per rank of a proc or actor mesh: the one derivation of "how is this rank",
used by the HTML reprs (`ProcMesh.rank_states()`, `ActorMesh.rank_states()`), the notebook
widgets and the admin view.

The state is the ownership tree's `Health` (`supervision/tree.py`), with `Health.STARTING` for
a proc that has not reported ready. Precedence, the tree's: stopped wins over failed (stopping
is what the owner did), failed over starting and running. An actor rank's state comes from the
tree (stopped, failed) and else from its proc's (a proc that died fails the rank at once, even
before the tree heard of it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from monarch._src.mesh.ownership import tree
from monarch._src.supervision.tree import Health

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcTable

__all__ = ["Health", "RankState", "actor_rank_state", "proc_rank_state"]

class RankState(NamedTuple):
    """The state of one rank (`state.value` is "starting", "running", "failed" or "stopped")."""

    state: Health
    detail: str  # the failure report, the stop reason, or ""
    pid: int | None  # the OS pid of the rank's proc, once known
    proc_rank: int  # the proc's rank in its proc table (its global rank)


def proc_rank_state(table: ProcTable, proc_rank: int) -> RankState:
    """The state of the proc at global rank `proc_rank` of `table`."""
    pid = table.pids[proc_rank]
    if table.stopped is not None:
        return RankState(Health.STOPPED, table.stopped, pid, proc_rank)
    report = table.failed.get(proc_rank)
    if report is not None:
        return RankState(Health.FAILED, report, pid, proc_rank)
    if not table.is_up(proc_rank):
        return RankState(Health.STARTING, "", pid, proc_rank)
    return RankState(Health.RUNNING, "", pid, proc_rank)


def actor_rank_state(
    table: ProcTable, mesh_key: str, rank: int, proc_rank: int, stopped: str | None = None
) -> RankState:
    """The state of rank `rank` (as spawned) of the actor mesh `mesh_key`, on the proc at
    `proc_rank` of `table`; `stopped`: the reason, when the caller knows the mesh was stopped."""
    status = tree.status(mesh_key)
    tree_stopped, failed = status if status is not None else (False, {})
    if tree_stopped or stopped is not None:
        return RankState(Health.STOPPED, stopped or "", table.pids[proc_rank], proc_rank)
    report = failed.get(rank)
    if report is not None:
        return RankState(Health.FAILED, report, table.pids[proc_rank], proc_rank)
    proc = proc_rank_state(table, proc_rank)
    if proc.state is Health.STOPPED:  # the tree has not heard yet: stopped, no reason shown
        return proc._replace(detail="")
    return proc
