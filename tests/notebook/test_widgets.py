"""`monarch.notebook` widgets against real procs: in this process, and inside a real kernel.

The in-process tests drive `MeshView.refresh()` by hand (the view's own thread may refresh too;
both read the same runtime state). The kernel test checks what a frontend would get: the widget
comm opening, the display message, and a state update after a rank was killed.
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.kernel import run_cell as _run_cell

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _pid_actor() -> type:
    from monarch.actor import Actor, endpoint

    class Pid(Actor):
        @endpoint
        def pid(self) -> int:
            return os.getpid()

    return Pid


def _kill(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_mesh_view_killed_rank_shows_failed_then_stopped(fault_recorder: Any) -> None:
    from monarch.actor import this_host
    from monarch.notebook import MeshView
    from monarch.notebook.widgets import STATE_COLORS

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    victim = None
    views: list[Any] = []
    try:
        mesh = procs.spawn("pids", _pid_actor())
        pids = mesh.pid.call().get(timeout=30)
        view = MeshView(mesh, refresh_hz=0)
        proc_view = MeshView(procs)
        views += [view, proc_view]
        assert view.states() == ["running", "running"]
        assert view.summary.value == "2 running"
        assert len(view.cells) == 2
        assert str(pids.item(gpus=1)) in proc_view.cells[1].tooltip

        victim = pids.item(gpus=1)
        os.kill(victim, signal.SIGKILL)
        fault_recorder.wait_for(1, timeout=30)
        view.refresh()
        proc_view.refresh()
        assert view.states() == ["running", "failed"]
        assert "1 failed" in view.summary.value
        assert "Killed(sig=9)" in view.cells[1].tooltip
        assert "gpus=1" in view.cells[1].tooltip
        assert STATE_COLORS["failed"] in view.cells[1].value
        assert STATE_COLORS["running"] in view.cells[0].value
        assert proc_view.states() == ["running", "failed"]

        mesh.stop()  # the stop is recorded at once; its reply may fail for the dead rank
        view.refresh()
        assert view.states() == ["stopped", "stopped"]
        assert view.summary.value == "2 stopped"
        procs.stop().get(timeout=60)
        proc_view.refresh()
        assert proc_view.states() == ["stopped", "stopped"]
    finally:
        for v in views:
            v.close()
        _kill(victim)
        if procs._table.stopped is None:
            procs.stop().get(timeout=60)


def test_spawn_progress_all_procs_up_turns_green() -> None:
    from monarch.actor import this_host
    from monarch.notebook import spawn_progress

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    progress = spawn_progress(procs)
    try:
        procs._table.ready.result(timeout=30)
        progress.refresh()  # the done callback already did this; refresh is idempotent
        assert progress.bar.value == 2
        assert progress.bar.max == 2
        assert progress.bar.bar_style == "success"
        assert progress.label.value.startswith("procs up: 2/2 ready in ")
    finally:
        progress.close()
        procs.stop().get(timeout=60)


def _failing_bootstrap() -> None:
    raise RuntimeError("bootstrap refused on purpose")


def test_spawn_progress_bootstrap_failure_turns_red(fault_recorder: Any) -> None:
    from monarch.actor import ActorError, this_host
    from monarch.notebook import spawn_progress

    procs = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=_failing_bootstrap)
    progress = spawn_progress(procs)
    try:
        # As in Monarch: a bootstrap's exception is the setup actor's call failing.
        with pytest.raises(ActorError, match="bootstrap refused on purpose"):
            procs._table.ready.result(timeout=30)
        progress.refresh()
        assert progress.bar.bar_style == "danger"
        assert "failed:" in progress.label.value
        assert "bootstrap refused on purpose" in progress.label.value
    finally:
        progress.close()
        procs.stop().get(timeout=60)


def test_mesh_view_rejects_other_objects() -> None:
    from monarch.notebook import MeshView

    with pytest.raises(TypeError, match="ActorMesh or a ProcMesh"):
        MeshView(object())  # type: ignore[arg-type]


# ---- through a real kernel ----------------------------------------------------------------

_SETUP = """
import os, signal, threading
import monarch.actor
from monarch.actor import Actor, endpoint, this_host
from monarch.notebook import MeshView

class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()

_faulted = threading.Event()
monarch.actor.unhandled_fault_hook = lambda failure: _faulted.set()
procs = this_host().spawn_procs(per_host={"gpus": 2})
mesh = procs.spawn("pids", Pid)
pids = mesh.pid.call().get(timeout=30)
view = MeshView(mesh, refresh_hz=0)
view
"""

_KILL = """
os.kill(pids.item(gpus=1), signal.SIGKILL)
assert _faulted.wait(30)
view.refresh()
print(view.summary.value)
"""


def test_mesh_view_in_kernel_opens_comm_and_sends_failed_update() -> None:
    from jupyter_client.manager import start_new_kernel

    from monarch.notebook.widgets import STATE_COLORS

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    manager, client = start_new_kernel(
        kernel_name="python3", cwd=str(REPO), env=env, startup_timeout=60
    )
    try:
        setup = _run_cell(client, textwrap.dedent(_SETUP))
        opens = [m for m in setup if m["msg_type"] == "comm_open"]
        assert any(m["content"]["target_name"] == "jupyter.widget" for m in opens), opens
        displays = [m for m in setup if m["msg_type"] in ("display_data", "execute_result")]
        assert any(
            "application/vnd.jupyter.widget-view+json" in m["content"]["data"] for m in displays
        ), displays

        kill = _run_cell(client, textwrap.dedent(_KILL))
        updates = [
            m for m in kill
            if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "update"
        ]
        failed = [
            m for m in updates
            if STATE_COLORS["failed"] in str(m["content"]["data"]["state"])
            or "1 failed" in str(m["content"]["data"]["state"])
        ]
        assert failed, updates
        printed = "".join(
            m["content"]["text"] for m in kill if m["msg_type"] == "stream"
        )
        assert "1 failed" in printed

        _run_cell(client, "view.close(); procs.stop().get(timeout=60)")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


from monarch.actor import Actor, context, endpoint, this_host  # noqa: E402


class _Values(Actor):
    @endpoint
    def matrix(self, n: int) -> Any:
        import numpy as np

        rank = context().actor_instance.rank["gpus"]
        return np.arange(n * n, dtype=np.float32).reshape(n, n) * (rank + 1)

    @endpoint
    def vector(self) -> Any:
        import torch

        return torch.linspace(0, 1, 50)

    @endpoint
    def text(self) -> str:
        return f"rank {context().actor_instance.rank['gpus']}"


@pytest.mark.timeout(120)
def test_fetch_view_shows_the_value_at_the_picked_point() -> None:
    from monarch.notebook import FetchView

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        values = procs.spawn("fetch_values", _Values)
        view = FetchView(values.matrix, 4)
        assert "shape (4, 4)" in view.output.value and "float32" in view.output.value
        assert "max 15" in view.output.value and "<table" in view.output.value  # a heatmap
        view.pickers["gpus"].value = 1  # picking another point fetches again
        assert "max 30" in view.output.value
        hist = FetchView(values.vector)
        assert "shape (50,)" in hist.output.value and "display:flex" in hist.output.value
        text = FetchView(values.text)
        text.pickers["gpus"].value = 1
        assert "rank 1" in text.output.value
    finally:
        procs.stop().get(timeout=60)


def test_fetch_view_needs_an_endpoint() -> None:
    from monarch.notebook import FetchView

    with pytest.raises(TypeError, match="needs an endpoint"):
        FetchView(object())  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_mesh_view_hover_counts_messages_out_and_replies_in() -> None:
    from monarch.notebook import MeshView

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        values = procs.spawn("counted", _Values)
        for _ in range(3):
            values.text.call().get(timeout=30)
        values.slice(gpus=1).text.call_one().get(timeout=30)
        view = MeshView(values, refresh_hz=0)
        try:
            assert "messages out 3, replies in 3" in view.cells[0].tooltip
            assert "messages out 4, replies in 4" in view.cells[1].tooltip
            assert "actor counted on" in view.cells[1].tooltip
        finally:
            view.close()
    finally:
        procs.stop().get(timeout=60)
