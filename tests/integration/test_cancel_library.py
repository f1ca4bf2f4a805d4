"""Cancelling a sync endpoint that is in library code: it is never interrupted there (real procs).

The interruption rule (`mesh/interruption.py`): a cancelled sync endpoint gets
`asyncio.CancelledError` only in the user's own code, never in the standard library's, an
installed library's or monarch's, whether the exception comes from `time.sleep` or is raised in
its thread. Each endpoint below records what the library call returned, or which exception came
out of it, so a test can tell "ran to its end" from "interrupted inside". Every long endpoint
sends on a port once it runs, so the tests cancel a call known to be running, never after a
sleep.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import time
from typing import Any

import pytest
import yaml

from monarch._src.job import pids
from monarch.actor import Channel, Port, endpoint, this_host
from tests.integration.test_cancel import Worker

pytestmark = pytest.mark.timeout(120)

# How long the library calls below last: longer than the grace before an interruption (0.5 s),
# so that both the cancellation point (`time.sleep`) and the interruption find them running.
LIBRARY_SECONDS = 1.5
CHILD = ["sleep", str(LIBRARY_SECONDS)]


def _where(exc: BaseException) -> str:
    """Which exception, raised in which function: the innermost frame of its traceback is where
    the interruption landed (the endpoint's own frame, never a library's)."""
    tb = exc.__traceback__
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{type(exc).__name__} in {tb.tb_frame.f_code.co_name}"


class InLibrary(Worker):
    """test_cancel's `Worker` (its `log`, `ping` and `history`) with endpoints that block in
    library code."""

    @endpoint
    def child(self, started: Port[str]) -> str:
        started.send("child")
        try:
            # `subprocess` polls its child with time.sleep when given a timeout (Popen._wait).
            code = subprocess.run(CHILD, timeout=60).returncode
            self.log.append(f"child exited {code}")
        except BaseException as exc:
            self.log.append(_where(exc))
            raise
        return "ran"

    @endpoint
    def monarch_wait(self, started: Port[str]) -> str:
        started.send("monarch")
        try:
            # Monarch's own polling loop (time.sleep between polls): nothing listens on port 1.
            pids.wait_listening("127.0.0.1", 1, os.getpid(), "", LIBRARY_SECONDS)
        except TimeoutError:
            self.log.append("monarch wait timed out")
        except BaseException as exc:
            self.log.append(_where(exc))
            raise
        return "waited"

    @endpoint
    def site_packages_then_spin(self, started: Port[str], n: int) -> str:
        started.send("yaml")
        try:
            yaml.dump(list(range(n)))  # pure-Python code of an installed library
            while True:  # the user's own loop: interrupted here, or as yaml returns
                pass
        except BaseException as exc:
            self.log.append(_where(exc))
            raise

    @endpoint
    def sleep_loop(self, started: Port[str]) -> str:
        started.send("sleep loop")
        try:
            while True:
                time.sleep(0.01)  # the user's own time.sleep: a cancellation point
        finally:
            self.log.append("sleep loop unwound")


@pytest.fixture(scope="module")
def procs() -> Any:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    yield procs
    procs.stop().get(timeout=60)


def _start(fut_of: Any, n: int = 2) -> Any:
    """Call `fut_of(port)` on every rank; return its future once every rank runs it."""
    port, receiver = Channel.open()
    fut = fut_of(port)
    for _ in range(n):
        receiver.recv().get(timeout=30)
    return fut


def _cancel_and_wait(fut: Any, mesh: Any) -> None:
    """Cancel `fut` (its reader gets CancelledError at once); wait until both actors serve."""
    assert fut.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        fut.get(timeout=1)
    assert mesh.ping.call().get(timeout=60).values() == ["pong", "pong"]


def test_cancelled_endpoint_in_subprocess_run_is_not_interrupted(procs: Any) -> None:
    m = procs.spawn("child", InLibrary)
    _cancel_and_wait(_start(m.child.call), m)
    # The child ran its full time and the endpoint saw it exit (it was not killed by a
    # CancelledError out of subprocess's polling sleep); the interruption may land in the
    # endpoint's own code as soon as subprocess returns, before the line that logs the exit.
    for log in m.history.call().get(timeout=10).values():
        assert log in (["child exited 0"], ["CancelledError in child"])


def test_cancelled_endpoint_in_monarch_code_is_not_interrupted(procs: Any) -> None:
    m = procs.spawn("monarch_wait", InLibrary)
    _cancel_and_wait(_start(m.monarch_wait.call), m)
    assert m.history.call().get(timeout=10).values() == [["monarch wait timed out"]] * 2


def test_cancelled_endpoint_in_an_installed_library_is_interrupted_back_in_user_code(
    procs: Any,
) -> None:
    t0 = time.monotonic()
    yaml.dump(list(range(1000)))
    per_item = (time.monotonic() - t0) / 1000
    n = max(1000, int(LIBRARY_SECONDS / per_item))  # about LIBRARY_SECONDS of yaml here
    m = procs.spawn("yaml", InLibrary)
    _cancel_and_wait(_start(lambda port: m.site_packages_then_spin.call(port, n)), m)
    # Never inside yaml: in the endpoint's own code (its loop, or the moment yaml returned).
    assert m.history.call().get(timeout=10).values() == [
        ["CancelledError in site_packages_then_spin"]] * 2


def test_cancelled_user_sleep_loop_is_interrupted(procs: Any) -> None:
    m = procs.spawn("sleep_loop", InLibrary)
    fut = _start(m.sleep_loop.call)
    t0 = time.monotonic()
    _cancel_and_wait(fut, m)
    assert time.monotonic() - t0 < 5.0
    assert m.history.call().get(timeout=10).values() == [["sleep loop unwound"]] * 2
