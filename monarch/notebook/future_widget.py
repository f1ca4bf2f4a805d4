"""`FutureView`: a live grid of the ranks of an `endpoint.call()` future as replies come in.

One cell per rank, coloured by its state (yellow pending, green done, red failed, grey
cancelled), under a summary line "3/4 done, 1 failed, 2.1 s". Hovering a cell shows the rank's
coordinates, state and time to its reply, and a failed rank's error. The view reads the
future's `progress()` (`MeshFuture`, which reads the call's reply port) from a daemon thread at
most `refresh_hz` times a second, and at once when the future completes; then it draws the
final state and the thread ends. A cell is redrawn only when its rank's state changed, so the
frontend gets one message per tick (the summary's clock) plus one per reply.

A cell whose value is such a future shows this view (`monarch.notebook.install()` fills the
hook slot `future_view` with `mimebundle`). Only this package imports ipywidgets.
"""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

from monarch._src.lowlevel import CallProgress, MeshFuture, RankProgress
from monarch.notebook.widgets import _CELL_STYLE, _stop_polling, rank_grid

__all__ = ["FUTURE_COLORS", "WIDGET_VIEW_MIME", "FutureView", "mimebundle"]

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"

# Background colour of a rank by `RankProgress.state` (the palette of the mesh widgets).
FUTURE_COLORS = {
    "pending": "#fff3c4",
    "done": "#cfe8cf",
    "failed": "#f4c7c3",
    "cancelled": "#dddddd",
}


class FutureView(ipywidgets.VBox):  # type: ignore[misc]  # VBox is untyped (Any)
    """A live per-rank view of the future of an endpoint's `call()`.

    The refresh thread (none if `refresh_hz` is 0) ends once the future is done and drawn, or
    on `close()`. `refresh()` may be called from any thread. The view holds the future; it
    never cancels it.
    """

    def __init__(self, future: MeshFuture[Any], refresh_hz: float = 4.0) -> None:
        if not isinstance(future, MeshFuture):
            raise TypeError(
                "FutureView shows the future of an endpoint's call() (endpoint.call(...)), got "
                f"{type(future).__name__}; call_one(), choose() and other futures have no ranks "
                "to show."
            )
        if refresh_hz < 0:
            raise ValueError(f"FutureView needs refresh_hz >= 0, got {refresh_hz}.")
        self.future = future
        self._lock = threading.Lock()  # serializes refresh() between the thread and callers
        self._closed = threading.Event()  # set by close(); ends the refresh thread
        self._wake = threading.Event()  # set when the future completes: draw it at once
        self._shown: CallProgress | None = None  # as last drawn; None before the first refresh
        extent = future.extent
        self.header = ipywidgets.HTML(
            f"<b>call</b> {html.escape(future.progress().what)} "
            f"<code>{html.escape(repr(extent))}</code>"
        )
        self.summary = ipywidgets.HTML("")
        self.cells, grid = rank_grid(extent)
        super().__init__([self.header, self.summary, grid])
        self.refresh()
        self._thread: threading.Thread | None = None
        if refresh_hz > 0 and not (self._shown is not None and self._shown.finished):
            future.add_done_callback(lambda _: self._wake.set())
            self._thread = threading.Thread(
                target=self._run, args=(1.0 / refresh_hz,), name="monarch-futureview",
                daemon=True,
            )
            self._thread.start()

    @property
    def counts(self) -> dict[str, int]:
        """Ranks per state as last drawn."""
        counts: dict[str, int] = {}
        for state in self.states():
            counts[state] = counts.get(state, 0) + 1
        return counts

    def states(self) -> list[str]:
        """State per rank as last drawn."""
        return [] if self._shown is None else [r.state for r in self._shown.ranks]

    @property
    def finished(self) -> bool:
        """Whether the last drawing was of the finished call (nothing will change any more)."""
        return self._shown is not None and self._shown.finished

    def refresh(self) -> None:
        """Read the call's progress now and redraw what changed."""
        with self._lock:
            if self._closed.is_set():
                return
            new = self.future.progress()
            old = self._shown
            for rank, entry in enumerate(new.ranks):
                if rank >= len(self.cells):
                    break
                if old is None or _drawn(old.ranks[rank]) != _drawn(entry):
                    self._draw_cell(entry)
            self._shown = new
            self.summary.value = html.escape(new.summary())

    def _draw_cell(self, entry: RankProgress) -> None:
        tip = f"rank {entry.rank} {entry.point!r}: {entry.state}"
        if entry.state != "pending":  # a pending rank's clock runs in the summary
            tip += f" {'in' if entry.state == 'done' else 'after'} {entry.elapsed:.2f} s"
        if entry.error:
            tip += f"\n{entry.error}"
        cell = self.cells[entry.rank]
        cell.value = (
            f"<div style='{_CELL_STYLE};background:{FUTURE_COLORS[entry.state]}' "
            f"title='{html.escape(tip, quote=True)}'>{entry.rank}</div>"
        )
        cell.tooltip = tip

    def _run(self, period: float) -> None:
        while not self._closed.is_set():
            self._wake.wait(period)
            done = self.future.done()
            try:
                self.refresh()
            except Exception:  # a view must never take the kernel down; try again next tick
                continue
            if done:
                return  # the final state is drawn

    def close(self) -> None:
        """Stop the refresh thread and close the widget and its children."""
        _stop_polling(self)
        super().close()


def _drawn(entry: RankProgress) -> tuple[str, str]:
    """What a cell shows of a rank that can change: its state and error (a pending rank's clock
    is in the summary, not redrawn per cell)."""
    return entry.state, entry.error


def mimebundle(future: MeshFuture[Any]) -> dict[str, Any]:
    """What a cell shows for `future` as its value: a new `FutureView`, with the future's plain
    repr as its text form (hook slot `future_view`)."""
    view = FutureView(future)
    return {
        "text/plain": repr(future),
        # The widget-view format (version 2.0) that ipywidgets 8 displays a widget with.
        WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": view.model_id},
    }
