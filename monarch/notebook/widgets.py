"""Live notebook widgets for meshes: `MeshView` (a grid of ranks) and `spawn_progress` (a
`progress_widget.ProgressBar` of procs coming up).

The HTML reprs in `monarch._src.mesh.html` are snapshots: they show the state of each rank when
the cell ran. These widgets poll the same runtime state (`rank_states()` of the mesh, one
`mesh.rank_state.RankState` per rank, and the proc table) from a daemon thread at a bounded rate and
push only what changed to the frontend, so a notebook watches ranks start, fail and stop without
re-running a cell. Pushing events from the runtime instead was rejected: the runtime would then
depend on ipywidgets, and a burst of failures would turn into a burst of comm messages; polling
bounds both.

Only this package imports ipywidgets.
"""

from __future__ import annotations

import html
import socket
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

from monarch._src.lowlevel import CastPlan, Health, Progress, plan
from monarch._src.mesh import traffic
from monarch._src.mesh.actor_mesh import ActorMesh
from monarch._src.mesh.html import STATE_COLORS
from monarch._src.mesh.proc_mesh import ProcMesh, proc_table
from monarch._src.shape import Extent
from monarch.notebook.progress_widget import ProgressBar

__all__ = ["MeshView", "spawn_progress"]

_STATE_ORDER = tuple(health.value for health in Health)  # the summary's order
# Above this many ranks the grid is not drawn (the frontend would get one widget per rank).
_MAX_CELLS = 1024
_CELL_STYLE = (
    "border:1px solid #999;padding:2px 6px;text-align:center;"
    "font-family:monospace;font-size:12px"
)
_HOST = socket.gethostname()  # the embedded local host's name (every proc runs here for now)
# (state, detail, pid) of one rank as shown; detail is the failure report, the stop reason, or "".
Shown = tuple[str, str, int | None]


def _proc_states(mesh: ProcMesh) -> list[Shown]:
    return [(r.state.value, r.detail, r.pid) for r in mesh.rank_states()]


def _spawned_ranks(cast: CastPlan) -> dict[int, int]:
    """Global proc rank -> the actor's rank in its mesh as spawned (how the message counters
    of `mesh.traffic` count it). The proc table lists the meshes spawned from this process; a
    reference to a mesh spawned elsewhere counts its own ranks."""
    for key, _name, _creator, ranks in proc_table(cast.proc_mesh).actor_meshes:
        if key == cast.actor_key:
            return {g: i for i, g in enumerate(ranks)}
    return {g: i for i, g in enumerate(cast.ranks)}


def _actor_states(mesh: ActorMesh[Any]) -> list[Shown]:
    """`ActorMesh.rank_states()`, with who and where each rank is and its message counts."""
    cast = plan(mesh)
    spawned = _spawned_ranks(cast)
    out: list[Shown] = []
    for r in mesh.rank_states():
        rank = spawned[r.proc_rank]
        flow = (f"actor {cast.mesh_name} on {_HOST}; messages out "
                f"{traffic.sent[(cast.actor_key, rank)]}, replies in "
                f"{traffic.answered[(cast.actor_key, rank)]}")
        out.append((r.state.value, f"{r.detail}\n{flow}" if r.detail else flow, r.pid))
    return out


def _coords(rank: int, extent: Extent) -> str:
    """`{label=i, ...}` of a rank in row-major order over `extent`."""
    parts = []
    rest = rank
    for label, size in reversed(list(zip(extent.labels, extent.sizes))):
        parts.append(f"{label}={rest % size}")
        rest //= size
    return "{" + ", ".join(reversed(parts)) + "}"


def rank_grid(extent: Extent) -> tuple[list[ipywidgets.HTML], ipywidgets.Widget]:
    """One empty HTML cell per rank of `extent` laid out as a grid (the last dimension across),
    and the grid; past `_MAX_CELLS` ranks no cells, and a note instead of the grid."""
    n = extent.nelements
    if n > _MAX_CELLS:
        return [], ipywidgets.HTML(f"<i>{n} ranks (too many to draw)</i>")
    cells = [ipywidgets.HTML("") for _ in range(n)]
    grid = ipywidgets.GridBox(cells, layout=ipywidgets.Layout(
        grid_template_columns=f"repeat({_grid_columns(extent)}, max-content)", grid_gap="2px"))
    return cells, grid


def _grid_columns(extent: Extent) -> int:
    sizes = list(extent.sizes)
    if len(sizes) == 1:
        return sizes[0]
    if len(sizes) == 2:
        return sizes[1]
    return 1  # zero dimensions: one cell; three or more: one row per rank


class MeshView(ipywidgets.VBox):  # type: ignore[misc]  # VBox is untyped (Any)
    """A live grid of the ranks of an `ActorMesh` or `ProcMesh`, coloured by state.

    A daemon thread calls `refresh()` at most `refresh_hz` times a second (never, if
    `refresh_hz` is 0) and ends on `close()` or once every rank is stopped. `refresh()` may be
    called from any thread; traits change only for ranks whose state changed, so the frontend
    gets a message only then. The view holds the mesh but never stops it.
    """

    def __init__(self, mesh: ActorMesh[Any] | ProcMesh, refresh_hz: float = 4.0) -> None:
        if isinstance(mesh, ActorMesh):
            cast = plan(mesh)
            kind, name = f"ActorMesh of {cast.actor_class.__qualname__}", cast.mesh_name
            self._states_of: Callable[[], list[Shown]] = lambda: _actor_states(mesh)
        elif isinstance(mesh, ProcMesh):
            kind, name = "ProcMesh", proc_table(mesh).name
            self._states_of = lambda: _proc_states(mesh)
        else:
            raise TypeError(
                f"MeshView shows an ActorMesh or a ProcMesh, got {type(mesh).__name__}."
            )
        if refresh_hz < 0:
            raise ValueError(f"MeshView needs refresh_hz >= 0, got {refresh_hz}.")
        self.mesh = mesh
        self._extent: Extent = mesh.extent
        self._kind = kind
        self._lock = threading.Lock()  # serializes refresh() between the thread and callers
        self._closed = threading.Event()  # set by close(); ends the refresh thread
        self._shown: list[Shown] | None = None  # per rank as last shown; None until a refresh
        self.header = ipywidgets.HTML(
            f"<b>{html.escape(kind)}</b> {html.escape(name)} "
            f"<code>{html.escape(repr(self._extent))}</code>"
        )
        self.summary = ipywidgets.HTML("")
        self.cells, grid = rank_grid(self._extent)
        super().__init__([self.header, self.summary, grid])
        self.refresh()
        self._thread: threading.Thread | None = None
        if refresh_hz > 0:
            self._thread = threading.Thread(
                target=self._run, args=(1.0 / refresh_hz,), name="monarch-meshview", daemon=True
            )
            self._thread.start()

    @property
    def counts(self) -> dict[str, int]:
        """Ranks per state as last shown."""
        counts: dict[str, int] = {}
        for state, _, _ in self._shown or []:
            counts[state] = counts.get(state, 0) + 1
        return counts

    def states(self) -> list[str]:
        """State per rank as last shown."""
        return [state for state, _, _ in self._shown or []]

    def refresh(self) -> None:
        """Read the runtime's state of every rank now and update what changed."""
        with self._lock:
            if self._closed.is_set():
                return
            new = self._states_of()
            old = self._shown
            for rank, entry in enumerate(new):
                if rank < len(self.cells) and (old is None or old[rank] != entry):
                    self._draw_cell(rank, entry)
            if new != old:
                self._shown = new
                counts = self.counts
                self.summary.value = ", ".join(
                    f"{counts[s]} {s}" for s in _STATE_ORDER if s in counts
                )

    def _draw_cell(self, rank: int, entry: Shown) -> None:
        state, detail, pid = entry
        tip = f"rank {rank} {_coords(rank, self._extent)}: {state}"
        if pid is not None:
            tip += f", pid {pid}"
        if detail:
            tip += f"\n{detail}"
        cell = self.cells[rank]
        cell.value = (
            f"<div style='{_CELL_STYLE};background:{STATE_COLORS[state]}' "
            f"title='{html.escape(tip, quote=True)}'>{rank}</div>"
        )
        cell.tooltip = tip

    def _run(self, period: float) -> None:
        while not self._closed.wait(period):
            try:
                self.refresh()
            except Exception:  # a view must never take the kernel down; try again next tick
                continue
            if self._shown and all(state == "stopped" for state, _, _ in self._shown):
                return  # stopped is final: nothing will change any more

    def close(self) -> None:
        """Stop the refresh thread and close the widget and its children."""
        _stop_polling(self)
        super().close()


def _stop_polling(widget: ipywidgets.Box) -> None:
    """End a polling widget's thread and close its children (grandchildren too)."""
    # `Widget.__del__` calls close() on a widget whose constructor raised, before any field.
    closed = getattr(widget, "_closed", None)
    if closed is not None:
        closed.set()
    thread = getattr(widget, "_thread", None)
    if thread is not None and thread is not threading.current_thread():
        thread.join()
    for child in list(widget.children):
        if isinstance(child, ipywidgets.Box):
            for grandchild in child.children:
                grandchild.close()
        child.close()


class SpawnProgress(ProgressBar):
    """A bar and a label "procs up: k/n" for a proc mesh that is starting.

    A `ProgressBar` fed by a `Progress` (the one abstraction of long work, shown whatever the
    `progress` config key says: it was asked for) that polls the proc table at most
    `refresh_hz` times a second until its `ready` future is done; then the bar turns green, or
    red with the error if a proc failed to start.
    """

    def __init__(self, proc_mesh: ProcMesh, refresh_hz: float = 4.0) -> None:
        if not isinstance(proc_mesh, ProcMesh):
            raise TypeError(
                f"spawn_progress takes a ProcMesh, got {type(proc_mesh).__name__}."
            )
        if refresh_hz <= 0:
            raise ValueError(f"spawn_progress needs refresh_hz > 0, got {refresh_hz}.")
        self._table = proc_table(proc_mesh)
        self._ranks = [r.proc_rank for r in proc_mesh.rank_states()]
        self._lock = threading.Lock()
        self._closed = threading.Event()  # set by close() or once `ready` is done
        super().__init__()
        self._progress = Progress("procs up", len(self._ranks), renderer=self)
        self.refresh()
        self._thread = threading.Thread(
            target=self._run, args=(1.0 / refresh_hz,), name="monarch-spawnprogress",
            daemon=True,
        )
        self._thread.start()
        # Completion is shown at once, not at the next tick.
        self._table.ready.add_done_callback(lambda _: self.refresh())

    def refresh(self) -> None:
        """Read how many procs are up now and update the bar and label."""
        with self._lock:
            table = self._table
            self._progress.update(sum(1 for g in self._ranks if table.is_up(g)))
            ready = self._table.ready
            if ready.done():
                self._progress.close(ready.exception(), detail="ready")
                self._closed.set()

    def _run(self, period: float) -> None:
        while not self._closed.wait(period):
            try:
                self.refresh()
            except Exception:  # a progress bar must never take the kernel down
                continue

    def close(self) -> None:
        """Stop polling and close the widget and its children."""
        _stop_polling(self)
        super().close()


def spawn_progress(proc_mesh: ProcMesh, refresh_hz: float = 4.0) -> SpawnProgress:
    """A progress bar for the procs of `proc_mesh` coming up; display it in a cell."""
    return SpawnProgress(proc_mesh, refresh_hz)
