"""`__supervise__`: the owner of a failing mesh decides what happens (§2.4, §4.36, §4.38).

An owner actor, spawned by the client, starts procs of its own and a child mesh on them, then
makes every child rank fail with a `broadcast`. The owner's `__supervise__` forwards each
`MeshFailure` it gets to a client port (so the test waits on the port, not on time) and then:
returns True (handled: the client hears nothing, the owner keeps serving), returns False or raises
(the owner fails and the client's fault hook gets a report naming both).

The owners live on one proc of this module's own, which starts a fork server the first time an
owner spawns procs; each test stops its owner mesh, which stops the child procs it owns.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, Channel, Port, endpoint, this_host

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0
UNHANDLED = "did not handle a supervision event from its child"
WHILE_HANDLING = "This error occurred while handling another failure"


class Child(Actor):
    @endpoint
    def ping(self) -> str:
        return "child"

    @endpoint
    def boom(self) -> None:
        raise ValueError("child boom")


class Owner(Actor):
    """Owns procs and a child mesh on them; `mode` says what `__supervise__` does."""

    def __init__(self, mode: str) -> None:
        self._mode = mode  # "handled", "unhandled" or "raises"
        self._reports: Port[str] | None = None  # where each MeshFailure's text goes, once set

    @endpoint
    def start_failing_child(self, reports: Port[str], child_name: str) -> None:
        self._reports = reports
        procs = this_host().spawn_procs(per_host={"gpus": 2})
        child = procs.spawn(child_name, Child)
        child.ping.call().get(timeout=TIMEOUT)
        child.boom.broadcast()

    @endpoint
    def ping(self) -> str:
        return "owner"

    def __supervise__(self, failure: Any) -> bool:
        assert self._reports is not None
        self._reports.send(str(failure))
        if self._mode == "raises":
            raise KeyError("supervise gave up")
        return self._mode == "handled"


class AsyncOwner(Owner):
    """The same, with an async `__supervise__` (it runs on the actor's loop). Its endpoints are
    async too: a sync actor with an async `__supervise__` is refused at spawn, as on
    torchmonarch."""

    @endpoint
    async def start_failing_child(  # type: ignore[override]
        self, reports: Port[str], child_name: str
    ) -> None:
        self._reports = reports
        procs = this_host().spawn_procs(per_host={"gpus": 2})
        child = procs.spawn(child_name, Child)
        await child.ping.call()
        child.boom.broadcast()

    @endpoint
    async def ping(self) -> str:  # type: ignore[override]
        return "owner"

    async def __supervise__(self, failure: Any) -> bool:  # type: ignore[override]
        return Owner.__supervise__(self, failure)


@pytest.fixture(scope="module")
def owner_procs() -> Iterator[Any]:
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        yield procs
    finally:
        procs.stop().get(timeout=TIMEOUT)


def _start(owner_procs: Any, cls: type[Owner], mode: str, name: str) -> tuple[Any, Any, str]:
    owner = owner_procs.spawn(name, cls, mode)
    assert owner.ping.call_one().get(timeout=TIMEOUT) == "owner"
    reports, receiver = Channel.open()
    child_name = f"{name}_child"
    owner.start_failing_child.call_one(reports, child_name).get(timeout=TIMEOUT)
    return owner, receiver, child_name


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cls", [Owner, AsyncOwner])
def test_supervise_returning_true_handles_child_failure_and_owner_keeps_serving(
    owner_procs: Any, fault_recorder: Any, cls: type[Owner]
) -> None:
    name = f"owner_handled_{cls.__name__.lower()}"
    owner, receiver, child_name = _start(owner_procs, cls, "handled", name)
    try:
        # One report per failed child rank, each naming the child mesh.
        reports = [receiver.recv().get(timeout=TIMEOUT) for _ in range(2)]
        for report in reports:
            assert "MeshFailure" in report
            assert f"mesh_name={child_name}," in report
            assert "child boom" in report
        assert sorted(re.findall(r"crashed_ranks=\[(\d)\]", "".join(reports))) == ["0", "1"]
        # Handled: the owner answers (after both supervise calls, which were queued first)
        # and nothing reached the client.
        assert owner.ping.call_one().get(timeout=TIMEOUT) == "owner"
        assert fault_recorder.texts == []
    finally:
        owner.stop().get(timeout=TIMEOUT)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("mode", "expected"),
    [("unhandled", UNHANDLED), ("raises", WHILE_HANDLING)],
)
def test_supervise_not_handling_child_failure_fails_owner_and_reaches_client_hook(
    owner_procs: Any, fault_recorder: Any, mode: str, expected: str
) -> None:
    name = f"owner_{mode}"
    owner, receiver, child_name = _start(owner_procs, Owner, mode, name)
    try:
        seen = receiver.recv().get(timeout=TIMEOUT)
        assert "MeshFailure" in seen
        assert f"mesh_name={child_name}," in seen
        fault_recorder.wait_for(1)
        [failure] = fault_recorder.failures
        report, event = failure.report(), str(failure)
        assert "MeshFailure" in event
        assert f"mesh_name={name}," in event
        # Monarch's texts: the event names the owner and embeds the child's event ("did not
        # handle" / "while handling a supervision event"); the report, which later calls
        # show, is the child's (unhandled) or the owner's with the child's below it (raises).
        assert child_name in event and child_name in report
        assert "child boom" in event and "child boom" in report
        if mode == "unhandled":
            assert expected in event
            assert report.startswith(f"The actor <root>.<{Owner.__module__}.Owner {name}")
            assert f".<{Child.__module__}.Child {child_name}" in report.split("\n")[0]
        else:
            assert "supervise gave up" in event and "supervise gave up" in report
            assert "This error occurred while handling a supervision event from its child" in event
            assert expected in report
        with pytest.raises(SupervisionError) as info:
            owner.ping.call_one().get(timeout=TIMEOUT)
        assert str(info.value) == f"Endpoint call {name}.ping() failed, {report}"
    finally:
        owner.stop().get(timeout=TIMEOUT)
