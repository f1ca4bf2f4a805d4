"""The admin view: its data model over real procs, rates and failure history, stack dumps of a
proc on demand, the terminal rendering and the notebook widget."""

from __future__ import annotations

import os
from typing import Any

import pytest

from monarch._src.admin.model import AdminModel, collect, find_proc
from monarch._src.admin.stacks import dump_stacks
from monarch._src.admin.tui import render
from tests.conftest import FaultRecorder
from tests.debug.actors import Crashing, Gate, Paused

pytestmark = pytest.mark.timeout(60)


def _rows(rows: list[dict[str, Any]], mesh: str) -> list[dict[str, Any]]:
    return sorted((r for r in rows if r["mesh"] == mesh), key=lambda r: r["rank"])


def _new_failures_only() -> Any:
    """`collect`, without the failures already known when it was made: this process keeps the
    failed meshes that earlier tests left (on the shared procs), and the model reports what it
    is given."""
    known = {(f["kind"], f["mesh"], f["rank"]) for f in collect()["failures"]}

    def source() -> Any:
        snap = collect()
        snap["failures"] = [f for f in snap["failures"]
                            if (f["kind"], f["mesh"], f["rank"]) not in known]
        return snap

    return source


def test_collect_lists_procs_and_actors_with_message_counts(procs2: Any) -> None:
    mesh = procs2.spawn("counted", Paused)
    try:
        mesh.ping.call().get(timeout=30)
        mesh.slice(gpus=1).ping.call_one().get(timeout=30)
        snap = collect()
        actors = _rows(snap["actors"], "counted")
        assert [(a["rank"], a["state"], a["sent"], a["answered"]) for a in actors] == [
            (0, "running", 1, 1), (1, "running", 2, 2)]
        pids = {a["pid"] for a in actors}
        procs = [p for p in snap["procs"] if p["pid"] in pids]
        assert len(procs) == 2 and all(p["state"] == "running" for p in procs)
        assert all(p["address"].startswith(("tcp://", "tls://")) for p in procs)
        assert snap["hosts"][0]["procs"] >= 2
    finally:
        mesh.stop().get(timeout=30)
    assert all(a["state"] == "stopped" for a in _rows(collect()["actors"], "counted"))


def test_failed_actor_shows_in_model_and_recent_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    import monarch.actor
    from monarch.actor import this_host

    recorder = FaultRecorder()
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", recorder)
    procs = this_host().spawn_procs(per_host={"gpus": 2}, name="crashprocs")
    try:
        mesh = procs.spawn("crasher", Crashing)
        mesh.ping.call().get(timeout=30)  # both procs are up
        model = AdminModel(_new_failures_only())
        assert model.sample()["recent_failures"] == []
        mesh.slice(gpus=1).crash.broadcast()
        recorder.wait_for(1)
        view = model.sample()
        actors = _rows(view["actors"], "crasher")
        assert [a["state"] for a in actors] == ["running", "failed"]
        assert "crashed on purpose" in actors[1]["detail"]
        (failure,) = view["recent_failures"]
        assert (failure["kind"], failure["mesh"], failure["rank"]) == ("actor", "crasher", 1)
        screen = "\n".join(render(view))
        assert "RECENT FAILURES (1)" in screen and "actor crasher[1]:" in screen
    finally:
        procs.stop().get(timeout=30)
    # Remembered after the mesh is gone.
    assert [f["mesh"] for f in model.sample()["recent_failures"]] == ["crasher"]


def test_admin_model_rates_are_count_differences_over_time() -> None:
    snaps = iter([
        {"time": 10.0, "hosts": [], "procs": [], "failures": [],
         "actors": [{"key": "k", "rank": 0, "sent": 5, "answered": 4}]},
        {"time": 12.0, "hosts": [], "procs": [], "failures": [],
         "actors": [{"key": "k", "rank": 0, "sent": 25, "answered": 10}]},
    ])
    model = AdminModel(lambda: next(snaps))
    first = model.sample()["actors"][0]
    assert (first["rate_out"], first["rate_in"]) == (0.0, 0.0)
    second = model.sample()["actors"][0]
    assert (second["rate_out"], second["rate_in"]) == (10.0, 3.0)


def test_find_proc_errors_name_the_mesh_and_what_to_do(procs2: Any) -> None:
    mesh = procs2.spawn("findme", Paused)
    try:
        assert find_proc("findme", 1).startswith(("tcp://", "tls://"))
        with pytest.raises(ValueError, match=r"Mesh findme has no rank 2; its ranks are 0\.\.1\."):
            find_proc("findme", 2)
        with pytest.raises(LookupError,
                           match=r"No mesh named 'ghost' in this client \(meshes: .*findme"):
            find_proc("ghost", 0)
    finally:
        mesh.stop().get(timeout=30)


def test_dump_stacks_of_a_proc_shows_the_blocked_endpoint(procs2: Any) -> None:
    gate = procs2.spawn("gate_s", Gate)
    opener = procs2.spawn("opener_s", Gate)
    try:
        blocked = gate.slice(gpus=1).block.call_one()
        dump = None
        # The call may not have reached the endpoint yet: ask until the stack shows it.
        for _ in range(200):
            dump = dump_stacks(find_proc("gate_s", 1), py_spy=False)
            if ", in block" in dump.python:
                break
        assert dump is not None and ", in block" in dump.python
        assert "actor <root>.<tests.debug.actors.Gate gate_s{'gpus': 1/2}>" in dump.python
        assert dump.py_spy is None and dump.py_spy_note == "not requested"
        assert f"(pid {dump.pid})" in str(dump)
        opener.slice(gpus=1).release.call_one().get(timeout=30)
        assert blocked.get(timeout=30) is True
    finally:
        gate.stop().get(timeout=30)
        opener.stop().get(timeout=30)


def test_dump_stacks_of_the_client_itself() -> None:
    dump = dump_stacks(find_proc("client", 0), py_spy=False)
    assert dump.pid == os.getpid()
    assert "Thread MainThread" in dump.python
    assert "test_dump_stacks_of_the_client_itself" in dump.python


def test_notebook_admin_view_shows_the_mesh(procs2: Any) -> None:
    pytest.importorskip("ipywidgets")
    from monarch.notebook.admin import AdminView, stacks

    mesh = procs2.spawn("viewed", Paused)
    view = AdminView(refresh_hz=0)
    try:
        assert "viewed" in view.body.value and "running" in view.body.value
        before = view.body.value
        view.refresh()
        mesh.ping.call().get(timeout=30)
        view.refresh()
        assert view.body.value != before  # the message counts changed
        rows = _rows(view.snapshot["actors"], "viewed")  # type: ignore[index]
        assert [r["sent"] for r in rows] == [1, 1]
        assert "Thread" in stacks("viewed", 0, py_spy=False).python
        with pytest.raises(ValueError, match="AdminView needs refresh_hz >= 0, got -1"):
            AdminView(refresh_hz=-1)
    finally:
        view.close()
        mesh.stop().get(timeout=30)
