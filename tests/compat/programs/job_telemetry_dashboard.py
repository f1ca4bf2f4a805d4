"""Monarch's observability page, dashboard part: ``TelemetryConfig(include_dashboard=True)``.

Follows "Monarch Dashboard": telemetry with the dashboard on makes ``job.state()`` set
``state.dashboard_url``, an ``http://localhost:<port>`` page (the port ``dashboard_port``, 0 for
any free one) that serves the web app as HTML on ``GET /``, next to ``state.telemetry_url``'s
SQL API. Only the page's existence is compared: the two implementations draw it
differently. (A second job with telemetry in the same process is refused by torchmonarch, so
the URL without ``include_dashboard`` is checked in tests/job/test_telemetry.py instead.)
"""

import urllib.request

from compat import check

from monarch.actor import Actor, endpoint
from monarch.job import ProcessJob, TelemetryConfig


class Pinger(Actor):
    @endpoint
    def ping(self, x: int) -> int:
        return x + 1


check("default include_dashboard", TelemetryConfig().include_dashboard)
check("default dashboard_port", TelemetryConfig().dashboard_port)
job = ProcessJob({"hosts": 1}).enable_telemetry(
    TelemetryConfig(include_dashboard=True, dashboard_port=0, snapshot_interval_secs=0))
state = job.state(cached_path=None)
url = state.dashboard_url
check("dashboard_url type", type(url).__name__)
check("dashboard_url on localhost", url.startswith("http://localhost:"))
check("dashboard port is a free one", int(url.rsplit(":", 1)[1]) > 0)
pingers = state.hosts.spawn_procs(per_host={"workers": 2}).spawn("pinger", Pinger)
check("calls answered", sorted(pingers.ping.call(1).get().values()))
with urllib.request.urlopen(url, timeout=30) as reply:
    page = reply.read().decode()
    check("GET / status", reply.status)
    check("GET / is HTML", reply.headers["Content-Type"].startswith("text/html"))
check("the page loads a script", "<script" in page)
rows = state.query_engine_client.query(
    "SELECT COUNT(*) AS n FROM meshes WHERE class = 'Python<Pinger>'")["rows"]
check("the SQL API beside it", rows)
check("same state, same url", job.state(cached_path=None).dashboard_url == url)
job.kill()
