"""A small job for the dashboard's tests: telemetry with the dashboard on, a mesh of two
pingers called CALLS times, a mesh of two that fail (a handler raises under `broadcast`, which
no caller awaits, so the actors fail), and a mesh of two stopped on purpose.

Rows reach the collectors within a fraction of a second; `wait_for` polls a route until what
a test expects is there (bounded by a deadline, never a fixed sleep).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from monarch.actor import Actor, endpoint
from monarch.job import ProcessJob, TelemetryConfig

CALLS = 12
FAILURE = "dashboard test failure"


class Pinger(Actor):
    @endpoint
    def ping(self, x: int) -> int:
        return x + 1

    @endpoint
    def fail(self) -> None:
        raise RuntimeError(FAILURE)


@contextmanager
def dashboard_job() -> Iterator[tuple[Any, Any]]:
    """A running job with the workload of the module doc; yields it and its state."""
    import monarch.actor

    job = ProcessJob({"hosts": 1}).enable_telemetry(
        TelemetryConfig(include_dashboard=True, dashboard_port=0, snapshot_interval_secs=0))
    previous_hook = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = lambda failure: None  # the failures are on purpose
    try:
        state = job.state(cached_path=None)
        procs = state.hosts.spawn_procs(per_host={"workers": 2}, name="trainers")
        pingers = procs.spawn("pinger", Pinger)
        for i in range(CALLS):
            pingers.ping.call(i).get()
        doomed = procs.spawn("doomed", Pinger)
        doomed.initialized.get()
        doomed.fail.broadcast()
        stopped = procs.spawn("retired", Pinger)
        stopped.initialized.get()
        stopped.stop("the test retires it").get()
        yield job, state
    finally:
        monarch.actor.unhandled_fault_hook = previous_hook
        job.kill()


def get(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    """(status, content type, body) of a request, HTTP errors included."""
    request = urllib.request.Request(  # a POST as the page sends it (JSON, or it is refused)
        url, method=method, data=b"{}" if method == "POST" else None,
        headers={"Content-Type": "application/json"} if method == "POST" else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read()


def get_json(url: str, method: str = "GET") -> tuple[int, Any]:
    status, _, body = get(url, method)
    return status, json.loads(body)


def wait_for(url: str, ready: Callable[[Any], bool], timeout: float = 30.0) -> Any:
    """The JSON of `url` once `ready(value)` holds (or the last one at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        status, value = get_json(url)
        assert status == 200, value
        if ready(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def overview_ready(value: dict[str, Any]) -> bool:
    """The workload is all in: the failed and the stopped actors, and every ping."""
    ping = [e for e in value["endpoints"] if e["endpoint"] == "ping"]
    return (value["counts"]["failed_actors"] == 2 and value["status"].get("Stopped") == 2
            and bool(ping) and ping[0]["n"] >= 2 * CALLS)
