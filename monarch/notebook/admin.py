"""`AdminView`: the admin view of a running mesh as a notebook widget.

The same data as `monarch top` (hosts, procs, actors with state, message counts and rates,
recent failures; see `monarch._src.admin.model`), read in-process and drawn as HTML tables.
Like `MeshView`, a daemon thread refreshes it at a bounded rate and the widget's value changes
only when the drawn table does, so an idle mesh sends nothing to the frontend. `stacks(mesh,
rank)` returns a proc's stack dump (see `monarch stacks`) for display in the cell.

Importing this module imports ipywidgets; `monarch.actor` never does.
"""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

from monarch._src.admin.model import AdminModel, Snapshot, find_proc
from monarch._src.admin.stacks import StackDump, dump_stacks
from monarch._src.mesh.html import STATE_COLORS

__all__ = ["AdminView", "stacks", "why"]

_TABLE = "border-collapse:collapse;font-family:monospace;font-size:12px"
_CELL = "border:1px solid #ccc;padding:1px 6px"


def _color(state: str) -> str:
    return STATE_COLORS.get(state, "#fff3b0")  # "paused" has no mesh colour: pale yellow


def _table(headers: list[str], rows: list[list[str]], states: list[str] | None = None) -> str:
    head = "".join(f"<th style='{_CELL}'>{html.escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        bg = f"background:{_color(states[i])};" if states is not None else ""
        cells = "".join(f"<td style='{_CELL}'>{html.escape(c)}</td>" for c in row)
        body.append(f"<tr style='{bg}'>{cells}</tr>")
    return f"<table style='{_TABLE}'><tr>{head}</tr>{''.join(body)}</table>"


def render_html(view: Snapshot) -> str:
    """The HTML of one sampled snapshot."""
    hosts = _table(["host", "procs", "running"],
                   [[h["name"], str(h["procs"]), str(h["running"])] for h in view["hosts"]])
    procs = _table(["mesh", "rank", "pid", "state", "address"],
                   [[p["mesh"], str(p["rank"]), str(p["pid"] or "-"), p["state"], p["address"]]
                    for p in view["procs"]], [p["state"] for p in view["procs"]])
    actors = _table(
        ["mesh", "rank", "proc", "state", "sent", "replies", "out/s", "in/s"],
        [[a["mesh"], str(a["rank"]), f"{a['proc_mesh']}[{a['proc_rank']}]", a["state"],
          str(a["sent"]), str(a["answered"]), f"{a.get('rate_out', 0.0):.1f}",
          f"{a.get('rate_in', 0.0):.1f}"] for a in view["actors"]],
        [a["state"] for a in view["actors"]])
    recent = view.get("recent_failures", view["failures"])
    failures = (_table(["kind", "mesh", "rank", "report"],
                       [[f["kind"], f["mesh"], str(f["rank"]), f["report"]] for f in recent[-8:]])
                if recent else "<i>none</i>")
    return (f"<b>Hosts</b>{hosts}<b>Procs</b>{procs}<b>Actors</b>{actors}"
            f"<b>Recent failures</b>{failures}")


class AdminView(ipywidgets.VBox):  # type: ignore[misc]  # VBox is untyped (Any)
    """A live admin view of this client's hosts, procs and actors.

    A daemon thread calls `refresh()` at most `refresh_hz` times a second (never if 0) until
    `close()`. `refresh()` may also be called from any thread. `snapshot` is the last view drawn.
    """

    def __init__(self, refresh_hz: float = 1.0) -> None:
        if refresh_hz < 0:
            raise ValueError(f"AdminView needs refresh_hz >= 0, got {refresh_hz}.")
        self._model = AdminModel()
        self._lock = threading.Lock()  # one refresh at a time
        self._closed = threading.Event()  # set by close(); ends the thread
        self.snapshot: Snapshot | None = None  # the last sampled snapshot
        self.body = ipywidgets.HTML("")
        super().__init__([ipywidgets.HTML("<b>monarch admin</b>"), self.body])
        self.refresh()
        self._thread: threading.Thread | None = None
        if refresh_hz > 0:
            self._thread = threading.Thread(target=self._run, args=(1.0 / refresh_hz,),
                                            name="monarch-adminview", daemon=True)
            self._thread.start()

    def refresh(self) -> None:
        """Sample the runtime now and redraw if anything shown changed."""
        with self._lock:
            if self._closed.is_set():
                return
            self.snapshot = self._model.sample()
            text = render_html(self.snapshot)
            if text != self.body.value:
                self.body.value = text

    def _run(self, period: float) -> None:
        while not self._closed.wait(period):
            try:
                self.refresh()
            except Exception:  # a view must never take the kernel down; try next tick
                continue

    def close(self) -> None:
        """Stop the refresh thread and close the widget."""
        closed = getattr(self, "_closed", None)
        if closed is not None:
            closed.set()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        for child in list(self.children):
            child.close()
        super().close()


def stacks(mesh: str, rank: int, *, py_spy: bool = True, timeout: float = 30.0) -> StackDump:
    """The stack dump of rank `rank` of the actor or proc mesh called `mesh` (`client` for this
    process); print it to see every thread's stack."""
    return dump_stacks(find_proc(mesh, rank), py_spy=py_spy, timeout=timeout)


def why(*, py_spy: bool = False) -> dict[str, Any]:
    """Hang triage of this client's meshes (what `%mesh_why` prints): every actor rank's stack
    and calls in flight, grouped, outliers named in `result["summary"]`. `print(
    monarch._src.admin.why.format_triage(result))` shows it as `monarch why` does."""
    from monarch._src.admin.why import triage

    return triage(py_spy=py_spy)
