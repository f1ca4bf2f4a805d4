"""The break of a connection its peer abandoned is no news when the same peer connected again.

Across a network cut both ends may give up on a connection without the other knowing (the
reset cannot cross the cut); once the link heals, the peer that is still alive connects again,
and the old connection's break arrives later (a retransmission answered by a reset). Reporting
it failed the live peer: a host re-attached after a healed cut was lost again seconds later
(found by benchmarks/chaos_soak.py). Only the break of a peer's newest incoming connection counts.
"""

from __future__ import annotations

import threading

import pytest

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
    a.mailbox.on_peer_lost.append(lambda peer, err: lost.set())
    assert b.ask(a.mailbox.address, 1) == 1
    b.close()  # b exits: its only (newest) connection to a breaks, a sends nothing
    assert lost.wait(10)
    assert a.on_loop(lambda: a.mailbox.is_dead(b.mailbox.address))
