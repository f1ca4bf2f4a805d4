"""`ProgressBar`: a progress report (`monarch._src.runtime.progress`) as a notebook widget.

A bar (`ipywidgets.IntProgress`, its maximum the report's total) and a label with the report's
line ("procs up: 1/2", "workspace app: 1.5 MiB/8.0 MiB"); the bar turns green when the work is
done, red when it failed. It is a renderer: `monarch.notebook.progress` displays one in the
running cell for each report shown there, and `spawn_progress` is one fed by the proc table.
"""

from __future__ import annotations

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

from monarch._src.lowlevel import ProgressState

__all__ = ["ProgressBar"]


class ProgressBar(ipywidgets.HBox):  # type: ignore[misc]  # HBox is untyped (Any)
    """A bar and a label showing one progress report; `show`/`finish` update them."""

    watched = True  # a widget is displayed in a cell, in front of someone

    def __init__(self) -> None:
        self.bar = ipywidgets.IntProgress(value=0, min=0, max=0)
        self.label = ipywidgets.Label("")
        super().__init__([self.bar, self.label])

    def show(self, state: ProgressState) -> None:
        """Draw `state`: the bar at done/total, the label its line."""
        self.bar.max = max(state.total, state.done)  # max first: value is clamped to it
        self.bar.value = state.done
        self.label.value = state.text

    def finish(self, state: ProgressState) -> None:
        """Draw the last state: green when done, red when failed."""
        self.show(state)
        self.bar.bar_style = "danger" if state.failed else "success"
