"""Progress reports in a notebook: each one shown is a `ProgressBar` in the running cell.

`install()` (run by `monarch.notebook.install()` under IPython) makes `cell_renderer` the
renderer of every progress report monarch creates (procs coming up, job bring-up, workspace
sync, large RDMA transfers; see `monarch._src.runtime.progress`). The widget is created and
displayed only when a report is shown, that is for work still running after the `progress`
config key's delay, so fast work leaves no trace in the cell. Without ipywidgets (the notebook
extra is not installed) the report is written to the cell's stderr instead, its first and last
line; a terminal IPython keeps the terminal's line.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from monarch._src.lowlevel import ProgressState, TerminalRenderer, set_renderer_factory

__all__ = ["CellRenderer", "cell_renderer", "install"]


class CellRenderer:
    """Displays a `ProgressBar` in the running cell on the first state, then updates it."""

    watched = True  # shown in a cell, in front of someone

    def __init__(self) -> None:
        self.bar: Any = None  # the ProgressBar, once displayed

    def show(self, state: ProgressState) -> None:
        if self.bar is None:
            from IPython.display import display

            from monarch.notebook.progress_widget import ProgressBar

            self.bar = ProgressBar()
            display(self.bar)  # type: ignore[no-untyped-call]  # IPython.display is unannotated
        self.bar.show(state)

    def finish(self, state: ProgressState) -> None:
        if self.bar is None:
            self.show(state)
        self.bar.finish(state)


def cell_renderer() -> CellRenderer | TerminalRenderer:
    """The renderer of one report under IPython: a widget in a kernel's cell (lines on the
    cell's stderr without ipywidgets); in a terminal IPython, which draws no widgets, the
    terminal's line."""
    from IPython import get_ipython

    if getattr(get_ipython(), "kernel", None) is None:
        return TerminalRenderer()
    if importlib.util.find_spec("ipywidgets") is None:
        return TerminalRenderer(sys.stderr, watched=True)
    return CellRenderer()


def install() -> None:
    """Make `cell_renderer` the renderer of the progress reports created from now on."""
    set_renderer_factory(cell_renderer)
