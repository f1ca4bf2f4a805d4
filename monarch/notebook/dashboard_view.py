"""`dashboard(state)`: the Monarch Dashboard inside the notebook, next to the code it watches.

The page is the one `state.dashboard_url` serves (`TelemetryConfig(include_dashboard=True)`),
framed in an `ipywidgets.HTML`, so it polls the job live while the cells run. In JupyterLab,
right-click the output and pick "Create New View for Cell Output" to dock it as a pane beside
the notebook; it keeps running when the cell is scrolled away.

The frame loads the URL in the browser, so the browser must reach the client's telemetry port
(true on a laptop; on a remote kernel forward the port, e.g. `ssh -L 8265:localhost:8265`, and
pass the forwarded URL). Importing this module imports ipywidgets; `monarch.actor` never does.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets  # type: ignore[import-untyped]  # ipywidgets ships no type information

__all__ = ["dashboard"]

VIEWS = ("overview", "topology", "explorer")


def _url_of(state_or_url: Any) -> str:
    url: str | None = state_or_url if isinstance(state_or_url, str) else \
        getattr(state_or_url, "dashboard_url", None)
    if url is None:
        raise ValueError(
            "This job serves no dashboard (state.dashboard_url is None): enable it with "
            "job.enable_telemetry(TelemetryConfig(include_dashboard=True)) before job.state().")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"dashboard() needs a JobState or an http(s) URL, got {url!r}.")
    return url.rstrip("/")


def dashboard(state_or_url: Any, *, view: str = "overview", height: int = 760) -> Any:
    """The dashboard of a job (its `JobState`, or the dashboard's URL) as a widget showing
    `view` ("overview", "topology" or "explorer") in a frame `height` pixels high."""
    if view not in VIEWS:
        raise ValueError(f"dashboard(view={view!r}): the views are {', '.join(VIEWS)}.")
    if isinstance(height, bool) or not isinstance(height, int) or height < 100:
        raise ValueError(f"dashboard(height={height!r}): give the frame's height in pixels "
                         "(an int >= 100).")
    src = f"{_url_of(state_or_url)}/#/{view}"
    frame = (f'<iframe src="{html.escape(src, quote=True)}" title="Monarch Dashboard" '
             f'style="width:100%;height:{height}px;border:1px solid #2a2f3a;'
             f'border-radius:8px;background:#0f1115" loading="eager"></iframe>'
             f'<div style="font:12px sans-serif;color:#888">Monarch Dashboard: '
             f'<a href="{html.escape(src, quote=True)}" target="_blank" rel="noopener">'
             f'{html.escape(src)}</a></div>')
    widget = ipywidgets.HTML(value=frame, layout=ipywidgets.Layout(width="100%"))
    widget.add_class("monarch-dashboard")
    return widget
