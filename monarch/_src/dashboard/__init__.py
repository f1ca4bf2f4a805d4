"""The Monarch Dashboard: a web page over a job's telemetry, served by the job's client.

`TelemetryConfig(include_dashboard=True)` mounts it on the job's telemetry server
(`routes.mount`); `state.dashboard_url` is its address. Three views, each polling its own JSON
route every two seconds while the page is visible: Overview (counts, health, message activity,
actor statuses, failures in red, traffic by endpoint), Topology (host -> proc -> actor meshes ->
actors as an SVG graph, and tables of actors and meshes) and Explorer (one actor or mesh: its
row, status history, messages in and out, a py-spy dump), plus a hang-triage button.

The page is plain HTML, CSS and ES modules in `static/`, shipped as package data: no build step
and nothing fetched from the network, so it works on a closed cluster. The alternative, a
React bundle as torchmonarch ships, needs an npm build whose output must be committed. Data
comes from SQL through the job's own engine (`data.py`), and the admin API is asked by the
server (`admin.py`) so its token stays out of the page.
"""

from __future__ import annotations

from monarch._src.dashboard.data import rows_of
from monarch._src.dashboard.routes import mount

__all__ = ["mount", "rows_of"]
