"""Failure reports, supervision events and the ports an actor answers for (no process started).

Monarch shows one failure two ways: the report ("The actor <a> and all its descendants have
failed:" and the reason indented by two spaces), which calls to the failed actor raise and
`MeshFailure.report()` returns, and the event ("Supervision event: actor <a> failed:"), which
`str(MeshFailure)` shows. A failure propagated from a child carries its own event.
"""

from __future__ import annotations

import pickle

import pytest

from monarch._src.mesh.port import Port, receiving_ports
from monarch._src.supervision.errors import (
    FailureReport,
    MeshFailure,
    SupervisionError,
    failure_event,
    failure_report,
)

ACTOR = "<root>.<m.W w{'gpus': 0/2}>"


def test_failure_report_indents_every_reason_line_by_two_spaces() -> None:
    reason = "actor explicitly aborted due to: Traceback (most recent call last):\n  File x\nE: y\n"
    assert failure_report(ACTOR, reason) == (
        f"The actor {ACTOR} and all its descendants have failed:\n"
        "  actor explicitly aborted due to: Traceback (most recent call last):\n"
        "    File x\n  E: y\n"
    )


def test_mesh_failure_str_shows_the_event_and_report_the_report() -> None:
    report = failure_report(ACTOR, "the process this actor was running on failed: Killed(sig=9)")
    failure = MeshFailure("w", [0], report)
    assert failure.report() == report
    assert str(failure) == (
        f"MeshFailure(mesh_name=w, crashed_ranks=[0], event=Supervision event: actor {ACTOR} "
        "failed:\n  the process this actor was running on failed: Killed(sig=9))"
    )
    with pytest.raises(TypeError, match="MeshFailure cannot be pickled"):
        pickle.dumps(failure)


def test_failure_report_with_its_own_event_keeps_it_across_pickling() -> None:
    report = FailureReport("the child's report", "Supervision event: actor <p> failed because")
    copy = pickle.loads(pickle.dumps(report))
    assert copy == "the child's report" and copy.event == report.event
    assert failure_event(copy) == "Supervision event: actor <p> failed because"
    assert str(MeshFailure("p", [0], copy)).endswith(
        "event=Supervision event: actor <p> failed because)")


def test_failure_event_of_a_text_without_an_actor_is_the_text() -> None:
    assert failure_event("the process this actor was running on failed") == (
        "the process this actor was running on failed")


def test_supervision_error_names_the_endpoint_when_known() -> None:
    err = SupervisionError("report", "mesh.ep")
    assert str(err) == "Endpoint call mesh.ep() failed, report"
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


class _Holder:
    """Records what a `PortHolder` is told."""

    def __init__(self) -> None:
        self.received: list[tuple[object, object, bool]] = []
        self.used: list[object] = []

    def port_received(self, port: Port) -> None:
        self.received.append((port._addr, port._rank, port._once))

    def port_used(self, port: Port) -> None:
        self.used.append(port._addr)


def test_ports_unpickled_while_receiving_belong_to_the_holder() -> None:
    reply = Port._create(("tcp://a", 1), 3, once=True)
    channel = Port._create(("tcp://a", 2))
    data = pickle.dumps((reply, channel))
    holder = _Holder()
    with receiving_ports(holder):
        got_reply, got_channel = pickle.loads(data)
    assert holder.received == [(("tcp://a", 1), 3, True), (("tcp://a", 2), None, False)]
    assert got_reply._holder is holder and got_channel._holder is holder
    outside = pickle.loads(data)[0]  # outside the block nobody answers for it
    assert outside._holder is None


def test_handing_a_reply_port_on_settles_it_for_its_holder() -> None:
    holder = _Holder()
    reply = Port._create(("tcp://a", 1), 0, once=True)
    reply._holder = holder
    channel = Port._create(("tcp://a", 2))
    channel._holder = holder
    pickle.dumps(channel)  # a multi-use port stays with its holder too
    assert holder.used == []
    pickle.dumps(reply)
    assert holder.used == [("tcp://a", 1)]
