"""The break of a connection its peer abandoned is no news when the same peer connected again.

Across a network cut both ends may give up on a connection without the other knowing (the
reset cannot cross the cut); once the link heals, the peer that is still alive connects again,
and the old connection's break arrives later (a retransmission answered by a reset). Reporting
it failed the live peer: a host re-attached after a healed cut was lost again seconds later
(found by benchmarks/chaos_soak.py). Only the break of a peer's newest incoming connection counts.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from monarch._src.supervision.errors import SupervisionError
from tests.unit.test_incarnation import _Box, boxes  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(60)


def test_the_break_of_a_superseded_connection_is_not_a_loss(boxes: list[_Box]) -> None:  # noqa: F811
    a, b = _Box(), _Box()
    boxes.extend([a, b])
    assert b.ask(a.mailbox.address, 1) == 1  # b's first connection to a
    # b abandons it without a knowing (as across a cut) and connects again.
    old = b.on_loop(lambda: b.mailbox.transport._peers.pop(a.mailbox.address))
    assert b.ask(a.mailbox.address, 2) == 2  # a second connection, from the same process
    b.on_loop(lambda: old.channel.abort())  # the old one's break reaches a only now
    assert a.ask(b.mailbox.address, 3) == 3  # a round trip through a after the break
    assert not a.on_loop(lambda: a.mailbox.is_dead(b.mailbox.address))
    assert b.ask(a.mailbox.address, 4) == 4


def test_the_break_of_the_newest_connection_is_still_a_loss(boxes: list[_Box]) -> None:  # noqa: F811
    a, b = _Box(), _Box()
    boxes.append(a)
    lost = threading.Event()
    a.mailbox.on_peer_lost.add(lambda peer, err: lost.set())
    assert b.ask(a.mailbox.address, 1) == 1
    b.close()  # b exits: its only (newest) connection to a breaks, a sends nothing
    assert lost.wait(10)
    assert a.on_loop(lambda: a.mailbox.is_dead(b.mailbox.address))


def test_the_echo_of_giving_a_peer_up_does_not_undo_its_revival(boxes: list[_Box]) -> None:  # noqa: F811
    """A controller lost a host across a cut (it gave it up and closed its connections), then
    attaches to it again once the link healed. The host, seeing the controller's connection
    close, takes it for dead in turn and closes its own old connection to the controller. That
    break reached the controller after the re-attach had revived the host, and failed it: "the
    peer closed the connection" (CI,
    tests/hosts/test_chaos.py::test_reattach_after_a_healed_cut)."""
    a, b = _Box(), _Box()
    boxes.extend([a, b])
    assert b.ask(a.mailbox.address, 1) == 1  # b's connection to a, and a's to b
    assert a.ask(b.mailbox.address, 1) == 1
    # a gives b up across the cut: its connection's close does not reach b yet.
    cut = a.on_loop(lambda: a.mailbox.transport._peers.pop(b.mailbox.address))
    a.on_loop(lambda: a.mailbox.mark_dead(b.mailbox.address, SupervisionError("host lost")))
    a.on_loop(lambda: a.mailbox.revive(b.mailbox.address))  # the re-attach
    broke = threading.Event()
    transport = a.mailbox.transport
    seen = transport._lost_incoming

    def lost_incoming(*args: Any) -> None:
        seen(*args)
        broke.set()

    transport._lost_incoming = lost_incoming  # type: ignore[method-assign]
    # The link heals: b hears of the close and gives a up in turn, closing its connection to a.
    a.on_loop(lambda: cut.channel.abort())
    assert broke.wait(10)  # b's old connection to a broke, and a saw it
    assert not a.on_loop(lambda: a.mailbox.is_dead(b.mailbox.address))
    b.on_loop(lambda: b.mailbox.revive(a.mailbox.address))  # b serves the re-attach
    assert a.ask(b.mailbox.address, 2) == 2
