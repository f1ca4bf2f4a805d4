"""Live mesh call futures: `partial()`, iteration, `progress()` and the `FutureView` widget,
against real procs, and the widget shown for a cell's value inside a real kernel.

Every rank of `Gated.work` waits until the test releases it (`release` on that rank's slice,
handled while `work` awaits: `work` is a concurrent endpoint), so the ranks answer in an order
the test chooses; the test then waits on the future's own iteration, never on time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monarch.actor import Actor, concurrent_endpoint, current_rank, endpoint
from tests.notebook.kernel import run_cell

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0


class Gated(Actor):
    """`work()` answers once `release()` reached the same rank; rank 1 raises."""

    def __init__(self) -> None:
        self._released: asyncio.Event | None = None  # made on the actor's loop, on first use

    def _event(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    @concurrent_endpoint
    async def work(self) -> int:
        await self._event().wait()
        self._released = None  # the next call waits for its own release
        rank = current_rank()["gpus"]
        if rank == 1:
            raise ValueError("rank 1 refuses on purpose")
        return rank * 10

    @endpoint
    async def release(self) -> None:
        self._event().set()

    @endpoint
    async def pid(self) -> int:
        return os.getpid()


@pytest.fixture(scope="module")
def gated() -> Iterator[Any]:
    from monarch.actor import this_host

    procs = this_host().spawn_procs(per_host={"gpus": 3})
    try:
        yield procs.spawn("gated", Gated)
    finally:
        procs.stop().get(timeout=60)


def _release(mesh: Any, rank: int) -> None:
    mesh.slice(gpus=rank).release.call_one().get(timeout=TIMEOUT)


def test_partial_and_iteration_give_replies_in_arrival_order(gated: Any) -> None:
    from monarch.actor import ActorError

    fut = gated.work.call()
    progress = fut.progress()
    assert [r.state for r in progress.ranks] == ["pending"] * 3
    assert fut.partial() == {}
    assert not progress.finished

    replies = iter(fut)
    _release(gated, 2)
    point, value = next(replies)  # waits for rank 2's reply
    assert (point.rank, point["gpus"], value) == (2, 2, 20)
    assert list(fut.partial().items()) == [(point, 20)]
    progress = fut.progress()
    assert [r.state for r in progress.ranks] == ["pending", "pending", "done"]
    assert progress.summary().startswith("1/3 done, 2 pending, ")
    assert progress.ranks[2].elapsed > 0 and progress.ranks[2].error == ""

    _release(gated, 0)
    assert next(replies)[1] == 0
    _release(gated, 1)
    point, error = next(replies)
    assert point.rank == 1 and isinstance(error, ActorError)
    assert "rank 1 refuses on purpose" in str(error)
    with pytest.raises(StopIteration):
        next(replies)

    partial = fut.partial()
    assert [p.rank for p in partial] == [2, 0, 1]  # arrival order
    assert partial[point] is error  # decoded once: the same object everywhere
    assert [(p.rank, v) for p, v in fut][:2] == [(2, 20), (0, 0)]  # again, from the start
    with pytest.raises(ActorError, match="rank 1 refuses on purpose"):
        fut.get(timeout=TIMEOUT)
    progress = fut.progress()
    assert progress.finished
    assert [r.state for r in progress.ranks] == ["done", "failed", "done"]
    assert "ValueError" in progress.ranks[1].error
    assert "rank 1 refuses on purpose" in progress.ranks[1].error
    assert re.fullmatch(r"2/3 done, 1 failed, \d+\.\d s", progress.summary())


def test_a_call_future_keeps_the_future_api_type_name_and_repr(gated: Any) -> None:
    from monarch.actor import Future

    fut = gated.work.call()
    for rank in (0, 2):
        _release(gated, rank)
    ranks = [point.rank for point, _ in itertools.islice(fut, 2)]
    assert sorted(ranks) == [0, 2]
    doubled = fut.map(lambda _mesh: "mapped")  # a Future's API, unchanged
    assert isinstance(fut, Future) and type(fut).__name__ == "Future"
    assert re.fullmatch(r"<monarch\._src\.actor\.future\.Future object at 0x[0-9a-f]+>", repr(fut))
    _release(gated, 1)
    assert doubled.exception(timeout=TIMEOUT) is not None  # rank 1 raised


def test_future_view_draws_each_rank_and_the_failed_rank_error(gated: Any) -> None:
    from monarch.notebook import FutureView
    from monarch.notebook.future_widget import FUTURE_COLORS

    fut = gated.work.call()
    view = FutureView(fut, refresh_hz=0)
    live = FutureView(fut, refresh_hz=50)  # its own thread, which must end with the call
    try:
        assert view.states() == ["pending"] * 3
        assert view.summary.value.startswith("0/3 done, 3 pending, ")
        assert "gated.work" in view.header.value and len(view.cells) == 3
        replies = iter(fut)
        _release(gated, 1)
        next(replies)
        view.refresh()
        assert view.states() == ["pending", "failed", "pending"]
        assert FUTURE_COLORS["failed"] in view.cells[1].value
        assert "rank 1 refuses on purpose" in view.cells[1].tooltip
        assert "{'gpus': 1/3}: failed after " in view.cells[1].tooltip
        assert "rank 1 refuses on purpose" in view.cells[1].value  # the hover (title)
        assert view.cells[0].tooltip == "rank 0 {'gpus': 0/3}: pending"
        for rank in (0, 2):
            _release(gated, rank)
        fut.exception(timeout=TIMEOUT)
        view.refresh()
        assert view.states() == ["done", "failed", "done"] and view.finished
        assert re.fullmatch(r"2/3 done, 1 failed, \d+\.\d s", view.summary.value)
        assert view.counts == {"done": 2, "failed": 1}
        assert re.search(r": done in \d+\.\d\d s$", view.cells[2].tooltip)
        assert live._thread is not None
        live._thread.join(timeout=TIMEOUT)
        assert not live._thread.is_alive()
        assert live.finished and live.states() == ["done", "failed", "done"]
    finally:
        view.close()
        live.close()


def test_a_dead_proc_fails_its_pending_ranks_and_ends_iteration() -> None:
    import monarch.actor
    from monarch.actor import this_host
    from monarch.notebook import FutureView

    failed = threading.Event()
    old_hook = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = lambda failure: failed.set()
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        mesh = procs.spawn("doomed", Gated)
        pids = mesh.pid.call().get(timeout=TIMEOUT)
        fut = mesh.work.call()
        view = FutureView(fut, refresh_hz=0)
        replies = iter(fut)
        _release(mesh, 0)
        assert next(replies)[1] == 0
        os.kill(pids.item(gpus=1), signal.SIGKILL)
        with pytest.raises(Exception, match="doomed"):
            next(replies)  # the call's own error, once the replies that came were given
        assert failed.wait(TIMEOUT)
        progress = fut.progress()
        assert [r.state for r in progress.ranks] == ["done", "failed"]
        assert progress.ranks[1].error  # the supervision error's text
        view.refresh()
        assert view.states() == ["done", "failed"] and progress.ranks[1].error in (
            view.cells[1].tooltip
        )
        view.close()
    finally:
        procs.stop().get(timeout=60)
        monarch.actor.unhandled_fault_hook = old_hook


def test_a_cancelled_call_shows_its_unanswered_ranks_cancelled(gated: Any) -> None:
    fut = gated.work.call()
    replies = iter(fut)
    _release(gated, 2)
    assert next(replies)[1] == 20
    assert fut.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        next(replies)
    progress = fut.progress()
    assert [r.state for r in progress.ranks] == ["cancelled", "cancelled", "done"]
    assert progress.summary().startswith("1/3 done, 2 cancelled, ")
    again = gated.work.call()  # the actors keep serving
    for rank in (0, 1, 2):
        _release(gated, rank)
    assert again.exception(timeout=TIMEOUT) is not None  # rank 1 raises, as always


_INTERRUPTED = """
import os, signal, threading
from monarch.actor import this_host
from tests.notebook.test_future_widget import Gated

procs = this_host().spawn_procs(per_host={"gpus": 2})
mesh = procs.spawn("gated", Gated)
fut = mesh.work.call()
replies = iter(fut)
mesh.slice(gpus=0).release.call_one().get(timeout=30)
print(next(replies), flush=True)
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    next(replies)  # rank 1 is never released
except KeyboardInterrupt as e:
    print("interrupted:", type(e).__name__, e, flush=True)
print(fut.cancelled(), [r.state for r in fut.progress().ranks], flush=True)
print(len(mesh.pid.call().get(timeout=30)), flush=True)  # the actors keep serving
procs.stop().get(timeout=60)
"""


def test_an_interrupt_while_iterating_cancels_the_call() -> None:
    # Its own process: SIGINT goes to that process's main thread.
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _INTERRUPTED], capture_output=True, text=True,
                         timeout=100, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "({'gpus': 0/2}, 0)",
        "interrupted: Interrupted cancelled the call to gated.work on 2 ranks",
        "True ['done', 'cancelled']",
        "2",
    ], (out.stdout, out.stderr)


def test_plain_repr_and_no_widget_outside_a_notebook(gated: Any) -> None:
    from IPython.core.formatters import format_display_data

    from monarch._src.lowlevel import hooks

    assert hooks.future_view.get() is None  # only a kernel's monarch.notebook fills it
    fut = gated.work.call()
    data, _ = format_display_data(fut)  # type: ignore[no-untyped-call]  # IPython: no types
    assert set(data) == {"text/plain"}
    assert data["text/plain"] == repr(fut)
    assert not [t for t in threading.enumerate() if t.name == "monarch-futureview"]
    for rank in (0, 1, 2):
        _release(gated, rank)
    fut.exception(timeout=TIMEOUT)


def test_future_view_needs_a_call_future() -> None:
    from monarch.actor import Future
    from monarch.notebook import FutureView

    with pytest.raises(TypeError, match=r"endpoint's call\(\)"):
        FutureView(Future.from_value(1))


# ---- through a real kernel ----------------------------------------------------------------

_SETUP = """
import asyncio
import monarch.actor
from monarch.actor import Actor, concurrent_endpoint, current_rank, endpoint, this_host

class Gated(Actor):  # as the test module's Gated: work() answers once release() came
    def __init__(self):
        self.released = None

    def event(self):
        if self.released is None:
            self.released = asyncio.Event()
        return self.released

    @concurrent_endpoint
    async def work(self) -> int:
        await self.event().wait()
        self.released = None
        if current_rank()["gpus"] == 1:
            raise ValueError("rank 1 refuses on purpose")
        return 0

    @endpoint
    async def release(self) -> None:
        self.event().set()

procs = this_host().spawn_procs(per_host={"gpus": 2})
mesh = procs.spawn("gated", Gated)
fut = mesh.work.call()
fut
"""

_FINISH = """
import threading
mesh.slice(gpus=0).release.call_one().get(timeout=30)
print(next(iter(fut)))
mesh.slice(gpus=1).release.call_one().get(timeout=30)
fut.exception(timeout=30)
for thread in threading.enumerate():
    if thread.name == "monarch-futureview":
        thread.join(30)
print(fut.progress().summary())
"""

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def test_a_cell_ending_in_a_call_future_displays_the_live_widget() -> None:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    manager, client = start_new_kernel(
        kernel_name="python3", cwd=str(REPO), env=env, startup_timeout=60
    )
    seen: list[dict[str, Any]] = []
    try:
        setup = run_cell(client, textwrap.dedent(_SETUP), seen)
        opens = [m for m in setup if m["msg_type"] == "comm_open"]
        assert any(m["content"]["target_name"] == "jupyter.widget" for m in opens), opens
        results = [m for m in setup if m["msg_type"] == "execute_result"]
        assert len(results) == 1 and WIDGET_MIME in results[0]["content"]["data"], results
        data = results[0]["content"]["data"]
        assert data["text/plain"].startswith("<monarch._src.actor.future.Future object at")
        model = data[WIDGET_MIME]["model_id"]
        assert model in {m["content"]["comm_id"] for m in opens}

        finish = run_cell(client, textwrap.dedent(_FINISH), seen)
        printed = "".join(m["content"]["text"] for m in finish if m["msg_type"] == "stream")
        assert "1/2 done, 1 failed" in printed, printed
        updates = [str(m["content"]["data"].get("state")) for m in seen
                   if m["msg_type"] == "comm_msg"]
        assert any("1/2 done, 1 failed" in u for u in updates), updates
        assert any("rank 1 refuses on purpose" in u for u in updates), updates
        run_cell(client, "procs.stop().get(timeout=60)", seen)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
