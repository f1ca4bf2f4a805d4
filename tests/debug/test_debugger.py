"""The distributed debugger in-process: breakpoint() in an endpoint, attaching from the client
with scripted commands, post-mortem, and what keeps running while an actor is paused."""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.debug.actors import AsyncPaused, Gate, Paused

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def controller() -> Any:
    from monarch._src.debug import debug_controller
    from monarch._src.debug.controller import debug_controller_here

    debug_controller_here().ensure_server("localhost", 0)  # not 27000: tests run side by side
    dc = debug_controller()
    dc.announce = False
    return dc


@pytest.fixture(scope="module")
def paused(procs2: Any) -> Iterator[Any]:
    mesh = procs2.spawn("paused", Paused)
    yield mesh
    mesh.stop().get(timeout=30)


def test_breakpoint_attach_scripted_inspects_and_changes_locals(controller: Any,
                                                                paused: Any) -> None:
    fut = paused.slice(gpus=1).compute.call_one(20)
    out = io.StringIO()
    transcript = controller.attach("paused", 1, commands=["p doubled", "doubled = 100", "c"],
                                   timeout=30, output=out)
    assert "attached to" in transcript and "paused" in transcript
    assert "(Pdb) p doubled\n40\n" in transcript
    assert "actors.py(" in transcript  # pdb shows the real source file and line
    assert fut.get(timeout=30) == 101  # the changed local was used after continue
    assert out.getvalue() == transcript
    assert controller.sessions() == []


def test_breakpoint_session_listed_by_name_and_rank(controller: Any, paused: Any) -> None:
    fut = paused.compute.call(3)
    controller.session("paused", 0, timeout=30)
    controller.session("paused", 1, timeout=30)
    infos = controller.sessions()
    assert [(i.name, i.rank, i.kind) for i in infos] == [("paused", 0, "breakpoint"),
                                                         ("paused", 1, "breakpoint")]
    assert all("actors.py" in i.where and i.pid > 0 for i in infos)
    for rank in (0, 1):
        controller.attach("paused", rank, commands=["c"], timeout=30, output=io.StringIO())
    assert [v for _, v in fut.get(timeout=30).items()] == [7, 7]


def test_paused_actor_shows_as_paused_in_the_admin_view(controller: Any, paused: Any) -> None:
    from monarch._src.admin.model import collect

    fut = paused.slice(gpus=1).compute.call_one(1)
    controller.session("paused", 1, timeout=30)
    rows = sorted((a for a in collect()["actors"] if a["mesh"] == "paused"),
                  key=lambda a: a["rank"])
    assert [(a["state"], a["detail"]) for a in rows] == [
        ("running", ""), ("paused", "in the debugger")]
    controller.attach("paused", 1, commands=["c"], timeout=30, output=io.StringIO())
    assert fut.get(timeout=30) == 3
    assert all(a["state"] == "running" for a in collect()["actors"] if a["mesh"] == "paused")


def test_breakpoint_pauses_only_that_actor(controller: Any, procs2: Any, paused: Any) -> None:
    other = procs2.spawn("other", Paused)
    try:
        fut = paused.slice(gpus=0).compute.call_one(1)
        controller.session("paused", 0, timeout=30)
        # Another actor on the same proc, and the paused actor's proc, keep answering.
        assert other.slice(gpus=0).ping.call_one().get(timeout=30) == "pong"
        assert [(i.name, i.rank) for i in controller.sessions()] == [("paused", 0)]
        controller.attach("paused", 0, commands=["continue"], timeout=30, output=io.StringIO())
        assert fut.get(timeout=30) == 3
    finally:
        other.stop().get(timeout=30)


def test_breakpoint_in_async_endpoint(controller: Any, procs2: Any) -> None:
    mesh = procs2.spawn("apaused", AsyncPaused)
    try:
        fut = mesh.slice(gpus=0).compute.call_one(4)
        transcript = controller.attach("apaused", 0, commands=["p tripled", "tripled = -1", "c"],
                                       timeout=30, output=io.StringIO())
        assert "(Pdb) p tripled\n12\n" in transcript
        assert fut.get(timeout=30) == -1
    finally:
        mesh.stop().get(timeout=30)


def test_attach_commands_exhausted_continues(controller: Any, paused: Any) -> None:
    fut = paused.slice(gpus=0).compute.call_one(5)
    transcript = controller.attach(commands=["p x"], timeout=30, output=io.StringIO())
    assert "(Pdb) continue\n" in transcript
    assert fut.get(timeout=30) == 11


def test_attach_with_input_function(controller: Any, paused: Any) -> None:
    answers = iter(["p x + 1", "c"])
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    fut = paused.slice(gpus=1).compute.call_one(9)
    out = io.StringIO()
    controller.attach("paused", 1, input=ask, timeout=30, output=out)
    assert prompts == ["(Pdb) ", "(Pdb) "]
    assert "10\n" in out.getvalue()
    assert fut.get(timeout=30) == 19


def test_session_lookup_without_paused_actor_names_what_is_paused(controller: Any) -> None:
    with pytest.raises(LookupError,
                       match=r"No paused session for actor nobody rank 3 \(paused: none\)"):
        controller.session("nobody", 3)


def test_post_mortem_on_endpoint_exception(controller: Any, paused: Any) -> None:
    controller.set_post_mortem(True)
    try:
        fut = paused.slice(gpus=0).fail.call_one(41)
        transcript = controller.attach("paused", 0, commands=["p local_value", "c"], timeout=30,
                                       output=io.StringIO())
    finally:
        controller.set_post_mortem(False)
    assert "post-mortem of ValueError: bad value 42" in transcript
    assert "(Pdb) p local_value\n42\n" in transcript
    from monarch.actor import ActorError

    with pytest.raises(ActorError, match="bad value 42"):
        fut.get(timeout=30)
    # Switched off again: the next failure is not held.
    with pytest.raises(ActorError, match="bad value 2"):
        paused.slice(gpus=0).fail.call_one(1).get(timeout=30)


def test_debug_agent_install_is_idempotent() -> None:
    from monarch._src.admin import stacks
    from monarch._src.debug import agent
    from monarch._src.runtime import runtime

    agent.install()
    agent.install()
    assert list(runtime.on_start).count(agent.install_debug_agent) == 1
    assert list(runtime.on_start).count(stacks.install_stacks) == 1


def test_breakpoint_outside_actor_uses_previous_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from monarch._src.debug import agent
    from monarch._src.runtime.runtime import get_runtime

    get_runtime()  # the hook is routed when the runtime starts (this test may run first)
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(agent, "_previous_hook", lambda *a, **k: calls.append(a))
    assert sys.breakpointhook is agent._breakpoint_hook
    breakpoint()  # noqa: T100 - the hook under test is called
    assert calls == [()]


def test_idle_session_continues_on_its_own(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                           controller: Any) -> None:
    from monarch.actor import this_host

    monkeypatch.setenv("MONARCH_DEBUG_IDLE_TIMEOUT", "1")
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        mesh = procs.spawn("idle", Paused)
        assert mesh.compute.call_one(2).get(timeout=30) == 5  # nobody attached: resumed
        assert all(i.name != "idle" for i in controller.sessions())
    finally:
        procs.stop().get(timeout=30)


def test_paused_actor_whose_proc_dies_ends_its_session(controller: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import monarch.actor
    from monarch.actor import this_host
    from tests.conftest import FaultRecorder

    recorder = FaultRecorder()
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", recorder)
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        mesh = procs.spawn("doomed", Paused)
        mesh.compute.call_one(1)
        session = controller.session("doomed", 0, timeout=30)
        os.kill(session.info.pid, signal.SIGKILL)
        assert session.ended.wait(30)
        chunks = []
        while (item := session.read(timeout=5)) is not None:
            chunks.append(item[0])
        assert "the actor's process is gone" in "".join(chunks)
        assert all(i.name != "doomed" for i in controller.sessions())
        recorder.wait_for(1)
    finally:
        procs.stop().get(timeout=30)


def test_gate_actor_blocks_until_released(procs2: Any) -> None:
    # Sanity of the helper the stack-dump tests rely on.
    gate = procs2.slice(gpus=0).spawn("gate0", Gate)
    opener = procs2.slice(gpus=0).spawn("opener0", Gate)
    try:
        fut = gate.block.call_one()
        opener.release.call_one().get(timeout=30)
        assert fut.get(timeout=30) is True
    finally:
        gate.stop().get(timeout=30)
        opener.stop().get(timeout=30)
