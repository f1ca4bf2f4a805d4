"""Unit tests for `Mailbox`: routing, pending keys, dead peers and control operations.

Mailboxes run on the test's own event loop and talk over `inproc://`, so nothing here opens a
socket or starts a process. An "actor" is any object with `enqueue(env)`; `_FakeActor` records
what it is given. Peers that are marked dead need not exist: `mark_dead` works on any address.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import pytest

from monarch._src.runtime import mailbox as mailbox_module
from monarch._src.runtime.control import control, control_op
from monarch._src.runtime.envelope import (
    CALL,
    CONTROL,
    PORT,
    PORT_ERROR,
    PORT_VALUE,
    Call,
    Control,
    PortMsg,
    decode,
    encode,
)
from monarch._src.runtime.mailbox import PENDING_PREFIX, Mailbox
from monarch._src.runtime.ports import (
    CountPort,
    GatherPort,
    OncePort,
    QueuePort,
    StreamPort,
    decode_reply,
)
from monarch._src.supervision.errors import SupervisionError, TransportError

WAIT = 5.0
NO_RANK = (0, (), ())  # the cast rank of a call to a single actor


@control_op("test_mailbox_hello")
class _Hello(NamedTuple):
    """A control operation of these tests: answered with a constant."""


@control_op("test_mailbox_add")
class _Add(NamedTuple):
    """A control operation of these tests: answered with `a + b`."""

    a: int
    b: int


class _FakeActor:
    """Records every envelope the mailbox hands it, on the loop thread."""

    def __init__(self) -> None:
        self.envs: list[Call] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def enqueue(self, env: Call) -> None:
        self.envs.append(env)
        for n, fut in self._waiters:
            if len(self.envs) >= n and not fut.done():
                fut.set_result(None)

    async def wait_for(self, n: int) -> list[Call]:
        """Wait until `n` envelopes arrived in total; return them all."""
        if len(self.envs) < n:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append((n, fut))
            await asyncio.wait_for(fut, WAIT)
        return self.envs


def _call(
    key: str, value: Any, reply: Any = None, rank: Any = NO_RANK
) -> Call:
    return Call(CALL, key, "method", encode(value), reply, rank, None)


async def _result(cf: concurrent.futures.Future[Any]) -> Any:
    return await asyncio.wait_for(asyncio.wrap_future(cf), WAIT)


async def _outcome(cf: concurrent.futures.Future[Any]) -> BaseException | None:
    try:
        await _result(cf)
    except Exception as exc:  # the tests inspect what the port failed with
        return exc
    return None


async def _settled(mailbox: Mailbox) -> None:
    """Wait until everything posted to `mailbox` so far (by this thread) has been routed."""
    probe = OncePort()
    port = mailbox.open_port(probe)
    mailbox.reply(port, "probe")
    assert decode_reply(await _result(probe.cf)) == "probe"


@pytest.fixture
async def mailboxes() -> AsyncIterator[Callable[[], Any]]:
    """A factory of started mailboxes on the test's loop; all are closed after the test."""
    made: list[Mailbox] = []

    async def make() -> Mailbox:
        mailbox = Mailbox(asyncio.get_running_loop())
        made.append(mailbox)
        await mailbox.start("inproc://")
        return mailbox

    yield make
    for mailbox in made:
        await mailbox.close()


# ---- local delivery ------------------------------------------------------------------------------


async def test_mailbox_start_inproc_sets_address(mailboxes: Any) -> None:
    mb = await mailboxes()
    assert mb.address.startswith("inproc://")


async def test_mailbox_post_to_self_delivers_call_locally(mailboxes: Any) -> None:
    mb = await mailboxes()
    actor = _FakeActor()
    mb.actors["a1"] = actor
    mb.post(mb.address, _call("a1", {"x": 1}))
    (env,) = await actor.wait_for(1)
    assert (env.kind, env.actor_key, env.method) == (CALL, "a1", "method")
    assert decode(env.payload) == {"x": 1}


async def test_mailbox_post_to_self_delivers_copy_of_buffers(mailboxes: Any) -> None:
    mb = await mailboxes()
    actor = _FakeActor()
    mb.actors["a1"] = actor
    data = bytearray(b"a" * (256 << 10))  # large enough to travel as an out-of-band buffer
    posted = _call("a1", data)
    sent_buffers = posted[3][1]
    assert sent_buffers, "expected an out-of-band buffer"
    mb.post(mb.address, posted)
    (env,) = await actor.wait_for(1)
    received = env.payload
    assert len(received[1]) == len(sent_buffers)
    for mine, theirs in zip(received[1], sent_buffers, strict=True):
        assert mine is not theirs
    data[:4] = b"ZZZZ"  # the sender reuses its buffer after the call was delivered
    assert bytes(memoryview(received[1][0])[:4]) == b"aaaa"
    assert decode(received) == bytearray(b"a" * (256 << 10))


async def test_mailbox_post_to_self_then_mutate_receiver_sees_original(mailboxes: Any) -> None:
    mb = await mailboxes()
    actor = _FakeActor()
    mb.actors["a1"] = actor
    data = bytearray(b"a" * (256 << 10))
    mb.post(mb.address, _call("a1", data))
    data[:4] = b"ZZZZ"  # right after post returns, before the loop has routed the envelope
    (env,) = await actor.wait_for(1)
    assert decode(env.payload)[:4] == b"aaaa"


async def test_mailbox_reply_to_self_completes_local_port(mailboxes: Any) -> None:
    mb = await mailboxes()
    entry = OncePort()
    port = mb.open_port(entry)
    assert port[0] == mb.address
    mb.reply(port, [1, 2, 3])
    assert decode_reply(await _result(entry.cf)) == [1, 2, 3]


async def test_mailbox_reply_error_to_self_raises_on_decode(mailboxes: Any) -> None:
    mb = await mailboxes()
    entry = OncePort()
    mb.reply_error(mb.open_port(entry), KeyError("nope"))
    raw = await _result(entry.cf)
    assert raw[0] == PORT_ERROR
    with pytest.raises(KeyError, match="nope"):
        decode_reply(raw)


async def test_mailbox_close_port_drops_later_replies(mailboxes: Any) -> None:
    mb = await mailboxes()
    entry = QueuePort()
    port = mb.open_port(entry)
    mb.reply(port, "kept")
    await _settled(mb)
    mb.close_port(port)
    mb.reply(port, "dropped")
    await _settled(mb)
    assert decode_reply(entry.take().result(timeout=0)[:2]) == "kept"
    assert not entry.take().done()


# ---- two mailboxes -------------------------------------------------------------------------------


async def test_mailbox_call_reaches_remote_actor_and_reply_returns(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    actor = _FakeActor()
    b.actors["echo"] = actor
    entry = OncePort()
    port = a.open_port(entry, (b.address,))
    a.post(b.address, _call("echo", "hi", reply=port))
    (env,) = await actor.wait_for(1)
    assert decode(env.payload) == "hi"
    assert env.reply == port
    b.reply(env.reply, "hi back", rank=env.rank)
    assert decode_reply(await _result(entry.cf)) == "hi back"


async def test_mailbox_thousand_posts_from_one_thread_arrive_in_order(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    actor = _FakeActor()
    b.actors["counter"] = actor
    n = 1000

    def produce() -> None:
        for i in range(n):
            a.post(b.address, _call("counter", i))

    producer = threading.Thread(target=produce)
    producer.start()
    envs = await actor.wait_for(n)
    producer.join(WAIT)
    assert [decode(env.payload) for env in envs] == list(range(n))


async def test_mailbox_posts_from_two_threads_each_keep_order(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    actor = _FakeActor()
    b.actors["counter"] = actor
    n = 500
    go = threading.Barrier(2)

    def produce(name: str) -> None:
        go.wait(WAIT)
        for i in range(n):
            a.post(b.address, _call("counter", (name, i)))

    producers = [threading.Thread(target=produce, args=(name,)) for name in ("x", "y")]
    for t in producers:
        t.start()
    envs = await actor.wait_for(2 * n)
    for t in producers:
        t.join(WAIT)
    values = [decode(env.payload) for env in envs]
    assert [i for (who, i) in values if who == "x"] == list(range(n))
    assert [i for (who, i) in values if who == "y"] == list(range(n))


@pytest.fixture
def short_unborn_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls to an unregistered actor are refused after 0.2 s instead of 10 s."""
    monkeypatch.setattr(mailbox_module, "_UNBORN_GRACE", 0.2)


async def test_mailbox_call_to_unknown_actor_replies_supervision_error(
    mailboxes: Any, short_unborn_grace: None
) -> None:
    a, b = await mailboxes(), await mailboxes()
    entry = GatherPort(2)
    port = a.open_port(entry, (b.address,))
    a.post(b.address, _call("ghost", None, reply=port, rank=(1, ("gpus",), (2,))))
    a.post(b.address, _call("ghost", None, reply=port, rank=(0, ("gpus",), (2,))))
    replies = await _result(entry.cf)
    for reply in replies:
        assert reply[0] == PORT_ERROR
        with pytest.raises(SupervisionError, match="ghost") as info:
            decode_reply(reply)
        assert b.address in str(info.value)


async def test_mailbox_call_to_unknown_actor_without_reply_is_dropped(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    actor = _FakeActor()
    b.actors["real"] = actor
    a.post(b.address, _call("ghost", None))
    a.post(b.address, _call("real", "after"))
    (env,) = await actor.wait_for(1)
    assert decode(env.payload) == "after"


async def test_mailbox_call_to_unknown_local_actor_replies_supervision_error(
    mailboxes: Any, short_unborn_grace: None
) -> None:
    mb = await mailboxes()
    entry = OncePort()
    port = mb.open_port(entry)
    mb.post(mb.address, _call("nobody", 1, reply=port))
    with pytest.raises(SupervisionError, match="nobody"):
        decode_reply(await _result(entry.cf))


async def test_mailbox_calls_before_the_actor_registers_wait_for_it_in_order(
    mailboxes: Any,
) -> None:
    # Another process may call a mesh (returned to it by its spawner) before the spawn arrives.
    a, b = await mailboxes(), await mailboxes()
    marker = _FakeActor()
    b.actors["marker"] = marker
    for i in range(3):
        a.post(b.address, _call("late", i))
    a.post(b.address, _call("marker", "sent after the early calls"))
    await marker.wait_for(1)
    late = _FakeActor()
    late.envs.append(_call("late", "__init__'s turn"))  # what add_actor's caller queued first
    b.loop.call_soon_threadsafe(b.add_actor, "late", late)
    a.post(b.address, _call("late", 3))
    envs = await late.wait_for(5)
    assert [decode(env.payload) for env in envs[1:]] == [0, 1, 2, 3]


# ---- pending keys --------------------------------------------------------------------------------


async def test_mailbox_pending_key_holds_posts_until_resolve(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    held, marker = _FakeActor(), _FakeActor()
    b.actors["held"] = held
    b.actors["marker"] = marker
    key = PENDING_PREFIX + "proc-7"
    for i in range(5):
        a.post(key, _call("held", i))
    a.post(b.address, _call("marker", "sent after the held posts"))
    await marker.wait_for(1)
    assert held.envs == []
    a.resolve(key, b.address)
    for i in range(5, 8):
        a.post(key, _call("held", i))
    envs = await held.wait_for(8)
    assert [decode(env.payload) for env in envs] == list(range(8))


async def test_mailbox_pending_key_resolved_ports_fail_when_address_dies(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    key = PENDING_PREFIX + "proc-8"
    entry = GatherPort(1)
    a.open_port(entry, (key,))
    await _settled(a)
    a.resolve(key, b.address)
    a.mark_dead(b.address, SupervisionError("proc-8 crashed"))
    err = await _outcome(entry.cf)
    assert isinstance(err, SupervisionError)
    assert "proc-8 crashed" in str(err)


async def test_mailbox_new_proc_on_a_dead_procs_reused_port_is_reachable(mailboxes: Any) -> None:
    # The OS reuses ports: a proc that ended leaves its address marked dead, and a new proc can
    # come up listening on that very address. Resolving it must make the address usable again.
    a, b = await mailboxes(), await mailboxes()
    actor = _FakeActor()
    b.actors["fresh"] = actor
    a.mark_dead(b.address, SupervisionError("the old proc on this port stopped"))
    assert a.is_dead(b.address)
    key = PENDING_PREFIX + "proc-9"
    a.post(key, _call("fresh", "held until the new proc is up"))
    a.resolve(key, b.address)
    assert not a.is_dead(b.address)
    envs = await actor.wait_for(1)
    assert decode(envs[0][3]) == "held until the new proc is up"


async def test_mailbox_pending_key_marked_dead_rejects_held_calls(mailboxes: Any) -> None:
    mb = await mailboxes()
    key = PENDING_PREFIX + "never-booted"
    waiting = OncePort()
    mb.open_port(waiting, (key,))
    replies = [OncePort() for _ in range(2)]
    for entry in replies:
        mb.post(key, _call("actor", None, reply=mb.open_port(entry)))
    await _settled(mb)
    mb.mark_dead(key, SupervisionError("bootstrap failed"))
    for entry in replies:
        with pytest.raises(SupervisionError, match="bootstrap failed"):
            decode_reply(await _result(entry.cf))
    assert isinstance(await _outcome(waiting.cf), SupervisionError)


# ---- dead peers ----------------------------------------------------------------------------------


async def test_mailbox_mark_dead_fails_every_waiting_port(mailboxes: Any) -> None:
    mb = await mailboxes()
    peer = "inproc://192.0.2.9/1/1"
    once, gather, stream, queue = OncePort(), GatherPort(3), StreamPort(2), QueuePort()
    for entry in (once, gather, stream, queue):
        mb.open_port(entry, (peer,))
    unrelated = OncePort()
    mb.open_port(unrelated, ("inproc://192.0.2.9/1/2",))
    await _settled(mb)
    mb.mark_dead(peer, SupervisionError("peer crashed"))
    for cf in (once.cf, gather.cf, *stream.cfs, queue.take()):
        err = await _outcome(cf)
        assert isinstance(err, SupervisionError)
        assert "peer crashed" in str(err)
    assert not unrelated.cf.done()


async def test_mailbox_mark_dead_wraps_other_errors_in_supervision_error(mailboxes: Any) -> None:
    mb = await mailboxes()
    peer = "inproc://192.0.2.9/1/3"
    entry = OncePort()
    mb.open_port(entry, (peer,))
    await _settled(mb)
    mb.mark_dead(peer, TransportError("connection reset"))
    err = await _outcome(entry.cf)
    assert isinstance(err, SupervisionError)
    assert "connection reset" in str(err)


async def test_mailbox_mark_dead_before_watch_registered_fails_port(mailboxes: Any) -> None:
    mb = await mailboxes()
    peer = "inproc://192.0.2.9/1/4"
    entry = OncePort()
    mb.open_port(entry, (peer,))  # the watch is registered later, on the loop
    mb.mark_dead(peer, SupervisionError("died first"))
    assert isinstance(await _outcome(entry.cf), SupervisionError)


async def test_mailbox_port_opened_after_death_fails_at_once(mailboxes: Any) -> None:
    mb = await mailboxes()
    peer = "inproc://192.0.2.9/1/5"
    mb.mark_dead(peer, SupervisionError("long gone"))
    entry = GatherPort(2)
    mb.open_port(entry, (peer,))
    err = await _outcome(entry.cf)
    assert isinstance(err, SupervisionError)
    assert "long gone" in str(err)


async def test_mailbox_port_opened_after_transport_death_fails_with_supervision_error(
    mailboxes: Any,
) -> None:
    mb = await mailboxes()
    peer = "inproc://192.0.2.9/1/6"
    mb.mark_dead(peer, TransportError("connection reset"))
    entry = OncePort()
    mb.open_port(entry, (peer,))
    err = await _outcome(entry.cf)
    assert isinstance(err, SupervisionError)
    assert "connection reset" in str(err)


async def test_mailbox_call_to_dead_peer_replies_supervision_error_at_once(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    actor = _FakeActor()
    b.actors["victim"] = actor
    a.mark_dead(b.address, SupervisionError("victim's proc died"))
    entry = OncePort()
    port = a.open_port(entry)  # not watching b: the reply must come from the routing itself
    a.post(b.address, _call("victim", "x", reply=port))
    with pytest.raises(SupervisionError, match="unreachable"):
        decode_reply(await _result(entry.cf))
    assert actor.envs == []


async def test_mailbox_control_to_dead_peer_replies_supervision_error(mailboxes: Any) -> None:
    mb = await mailboxes()
    peer = "inproc://192.0.2.9/1/7"
    mb.mark_dead(peer, TransportError("gone"))
    entry = OncePort()
    mb.post(peer, control(_Add(1, 2), mb.open_port(entry)))
    with pytest.raises(SupervisionError, match="gone"):
        decode_reply(await _result(entry.cf))


async def test_mailbox_mark_dead_calls_on_peer_lost(mailboxes: Any) -> None:
    mb = await mailboxes()
    seen: list[tuple[str, BaseException]] = []
    mb.on_peer_lost.add(lambda peer, err: seen.append((peer, err)))
    err = SupervisionError("bye")
    mb.mark_dead("inproc://192.0.2.9/1/8", err)
    assert seen == [("inproc://192.0.2.9/1/8", err)]


async def test_mailbox_mark_dead_twice_keeps_first_error(mailboxes: Any) -> None:
    mb = await mailboxes()
    peer = "inproc://192.0.2.9/1/9"
    seen: list[BaseException] = []
    mb.on_peer_lost.add(lambda _, err: seen.append(err))
    first = SupervisionError("killed by signal 9")
    mb.mark_dead(peer, first)
    mb.mark_dead(peer, TransportError("connection reset"))
    assert seen == [first]
    entry = OncePort()
    mb.open_port(entry, (peer,))
    assert await _outcome(entry.cf) is first


async def test_mailbox_count_port_dead_peer_counts_as_answered(mailboxes: Any) -> None:
    mb = await mailboxes()
    dead, alive = "inproc://192.0.2.9/2/1", "inproc://192.0.2.9/2/2"
    entry = CountPort(2)
    port = mb.open_port(entry, (dead, alive))
    await _settled(mb)
    mb.mark_dead(dead, SupervisionError("one proc died"))
    assert not entry.cf.done()
    mb.reply(port, None, rank=1)
    assert await _result(entry.cf) is None


async def test_mailbox_count_port_opened_after_one_peer_died_completes(mailboxes: Any) -> None:
    mb = await mailboxes()
    dead, alive = "inproc://192.0.2.9/3/1", "inproc://192.0.2.9/3/2"
    mb.mark_dead(dead, SupervisionError("died before the stop"))
    entry = CountPort(2)
    port = mb.open_port(entry, (dead, alive))
    mb.reply(port, None, rank=1)  # the live peer's acknowledgement
    await _settled(mb)
    assert entry.cf.done()
    assert entry.cf.result(timeout=0) is None


async def test_mailbox_count_port_peer_dies_after_its_ack_still_waits(mailboxes: Any) -> None:
    mb = await mailboxes()
    first, second = "inproc://192.0.2.9/4/1", "inproc://192.0.2.9/4/2"
    entry = CountPort(2)
    port = mb.open_port(entry, (first, second))
    # `first` acknowledges (as received from it), then dies: its death no longer counts.
    mb._dispatch(first, PortMsg(PORT, port[1], encode(None), 0, PORT_VALUE))
    mb.mark_dead(first, SupervisionError("exited after acknowledging"))
    assert not entry.cf.done()  # `second` has not answered yet
    mb._dispatch(second, PortMsg(PORT, port[1], encode(None), 1, PORT_VALUE))
    assert entry.cf.done() and entry.cf.result(timeout=0) is None


async def test_mailbox_listener_closed_fails_ports_waiting_on_it(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    actor = _FakeActor()
    b.actors["srv"] = actor
    first = OncePort()
    a.post(b.address, _call("srv", 1, reply=a.open_port(first, (b.address,))))
    (env,) = await actor.wait_for(1)
    b.reply(env.reply, "answered")  # b now holds a connection back to a
    assert decode_reply(await _result(first.cf)) == "answered"
    pending = OncePort()
    a.open_port(pending, (b.address,))
    await _settled(a)
    await b.close()
    err = await _outcome(pending.cf)
    assert isinstance(err, SupervisionError)
    assert b.address in str(err)


async def test_mailbox_expected_exit_reports_given_error(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    b.control.register(_Hello, lambda peer, op, reply: b.reply(reply, "pong"))
    entry = OncePort()
    a.post(b.address, control(_Hello(), a.open_port(entry)))
    assert decode_reply(await _result(entry.cf)) == "pong"
    a.expect_exit(b.address, SupervisionError("stopped on request"))
    pending = OncePort()
    a.open_port(pending, (b.address,))
    await _settled(a)
    await b.close()
    err = await _outcome(pending.cf)
    assert isinstance(err, SupervisionError)
    assert "stopped on request" in str(err)


async def _connected_pair_with_delegate(
    mailboxes: Any,
) -> tuple[Mailbox, Mailbox, asyncio.Queue[tuple[str, BaseException]]]:
    """Mailboxes `a` and `b` connected both ways; `a` delegates lost peers to a watcher."""
    a, b = await mailboxes(), await mailboxes()
    asked: asyncio.Queue[tuple[str, BaseException]] = asyncio.Queue()

    def delegate(peer: str, err: BaseException) -> bool:
        asked.put_nowait((peer, err))
        return True  # "that process is watched; its watcher will report why it ended"

    a.lost_delegate.install(delegate)
    b.control.register(_Hello, lambda peer, op, reply: b.reply(reply, "hi"))
    entry = OncePort()
    a.post(b.address, control(_Hello(), a.open_port(entry)))
    assert decode_reply(await _result(entry.cf)) == "hi"  # b now holds a connection back to a
    return a, b, asked


async def test_mailbox_lost_delegate_holds_until_mark_dead(mailboxes: Any) -> None:
    a, b, asked = await _connected_pair_with_delegate(mailboxes)
    watching = OncePort()
    a.open_port(watching, (b.address,))
    await _settled(a)
    await b.close()
    peer, err = await asyncio.wait_for(asked.get(), WAIT)
    assert peer == b.address
    assert isinstance(err, TransportError)
    a.post(b.address, control(_Hello()))  # the write to b fails...
    await asyncio.wait_for(asked.get(), WAIT)  # ...and the delegate is asked again
    call_reply = OncePort()
    a.post(b.address, _call("actor", None, reply=a.open_port(call_reply)))
    await asyncio.wait_for(asked.get(), WAIT)  # this call could not go: held, not rejected yet
    assert not watching.cf.done()
    assert not call_reply.cf.done()
    reason = SupervisionError("the proc was killed by signal 9")
    a.mark_dead(b.address, reason)
    assert await _outcome(watching.cf) is reason
    with pytest.raises(SupervisionError, match="signal 9"):
        decode_reply(await _result(call_reply.cf))


async def test_mailbox_call_in_failed_write_rejected_after_mark_dead(mailboxes: Any) -> None:
    a, b, asked = await _connected_pair_with_delegate(mailboxes)
    await b.close()
    await asyncio.wait_for(asked.get(), WAIT)  # the connection from b broke
    call_reply = OncePort()
    a.post(b.address, _call("actor", None, reply=a.open_port(call_reply)))  # its write fails
    await asyncio.wait_for(asked.get(), WAIT)
    a.mark_dead(b.address, SupervisionError("the proc was killed by signal 9"))
    await _settled(a)  # a rejection, had there been one, was posted before this probe
    assert call_reply.cf.done()
    with pytest.raises(SupervisionError, match="signal 9"):
        decode_reply(call_reply.cf.result(timeout=0))


# ---- control operations --------------------------------------------------------------------------


async def test_mailbox_control_op_dispatched_to_handler_as_record(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    calls: list[tuple[str, _Add, Any]] = []

    def handler(peer: str, op: _Add, reply: Any) -> None:
        calls.append((peer, op, reply))
        b.reply(reply, op.a + op.b)

    b.control.register(_Add, handler)
    entry = OncePort()
    port = a.open_port(entry)
    a.post(b.address, control(_Add(2, 3), port))
    assert decode_reply(await _result(entry.cf)) == 5
    assert calls == [(a.address, _Add(2, 3), port)]
    assert type(calls[0][1]) is _Add


async def test_mailbox_control_op_unknown_logged(
    mailboxes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = await mailboxes(), await mailboxes()
    b.control.register(_Hello, lambda peer, op, reply: b.reply(reply, "ok"))
    entry = OncePort()
    with caplog.at_level(logging.ERROR, logger="monarch._src.runtime.mailbox"):
        # What a newer peer sends: an operation this process has no record of.
        a.post(b.address, Control(CONTROL, "no_such_op", (), None))
        a.post(b.address, control(_Hello(), a.open_port(entry)))
        assert decode_reply(await _result(entry.cf)) == "ok"
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("unknown control operation 'no_such_op'" in m and a.address in m for m in messages)


async def test_mailbox_control_op_raising_logged_and_error_replied(
    mailboxes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    mb = await mailboxes()

    def broken(peer: str, op: _Hello, reply: Any) -> None:
        raise ValueError("handler bug")

    mb.control.register(_Hello, broken)
    entry = OncePort()
    with caplog.at_level(logging.ERROR, logger="monarch._src.runtime.mailbox"):
        mb.post(mb.address, control(_Hello(), mb.open_port(entry)))
        with pytest.raises(ValueError, match="handler bug"):
            decode_reply(await _result(entry.cf))
    assert any("control operation 'test_mailbox_hello' failed" in r.getMessage()
               for r in caplog.records)


async def test_mailbox_control_op_with_other_fields_refused_and_error_replied(
    mailboxes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = await mailboxes(), await mailboxes()
    b.control.register(_Add, lambda peer, op, reply: b.reply(reply, op.a + op.b))
    entry = OncePort()
    with caplog.at_level(logging.ERROR, logger="monarch._src.runtime.mailbox"):
        # A peer whose `_Add` has a third field (another version of monarch).
        a.post(b.address, Control(CONTROL, "test_mailbox_add", (1, 2, 3), a.open_port(entry)))
        with pytest.raises(ValueError, match=r"3 fields where this process expects 2 \(a, b\)"):
            decode_reply(await _result(entry.cf))
    assert any("control operation 'test_mailbox_add' failed" in r.getMessage()
               for r in caplog.records)


async def test_mailbox_port_envelope_for_unknown_port_ignored(mailboxes: Any) -> None:
    a, b = await mailboxes(), await mailboxes()
    a.post(b.address, PortMsg(PORT, 987654, encode("stray"), None, PORT_VALUE))
    entry = OncePort()
    port = b.open_port(entry)
    a.post(b.address, PortMsg(PORT, port[1], encode("real"), None, PORT_VALUE))
    assert decode_reply(await _result(entry.cf)) == "real"
