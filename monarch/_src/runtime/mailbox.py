"""The proc agent's mailbox: routing of envelopes into and out of one process.

Every monarch process (the controller and each proc) has exactly one `Mailbox`. It owns the
process's runtime loop (a background thread on the controller, the main thread in a proc), the
transport, the port table and the table of actors living here.

Sending: any thread calls `post(addr, envelope)`. Posts go through one thread-safe queue that
the loop drains in order, waking the loop only when the queue was empty, so a burst of calls costs
one wake-up. Envelopes for this very process are delivered without touching the network.

Receiving: batches arrive on the loop; `CALL` envelopes go to the target actor's inbox, `PORT`
envelopes to the port table, `CONTROL` envelopes to the handler of their operation's record
type in `Mailbox.control` (`runtime/control.py`).

Failure: when the connection to a peer breaks, every port still waiting on a reply from that peer
fails with `SupervisionError`, and later calls to it fail at once; nothing waits for a timeout.

A call or reply without out-of-band buffers, posted by a thread other than the loop's while
nothing waits for the loop, is written by the posting thread itself when the peer's connection is
idle (`post`, `Transport.send_direct`): a caller that waits for each answer saves a thread hop
each way, while a burst still goes through the loop in batches.

Procs not up yet: a proc's routing key is `pending:<proc id>` (`pending_key`) until its
`proc_ready` arrives. Envelopes to it are held in order, and `resolve` routes them before it
publishes the address, so the order per sender holds. A bootstrap failure marks the key dead,
which fails what was held. A call for an actor key not registered yet waits `_UNBORN_GRACE` for
the spawn (another process may have spawned the mesh), behind `__init__`, then is refused.

Death is kept per incarnation, not per address: each transport has a random incarnation that the
two ends of a connection exchange in their hello. `mark_dead` records the dead one's; a hello
from another incarnation at that address (the OS reused the port) revives it, as do `resolve`
and attaching to a host, while the dead process, heard again, stays dead. When the connection
to a proc the local host agent watches breaks first, `lost_delegate` holds what could not be
sent and lets the child watch report the exact exit status.

Ports handed on in call arguments (`ports_handed`) are answered by this process when the proc
they went to dies: reply ports once, with the failure; multi-use ports too when the proc failed
(`proc_failed`, never a stop). Ports of another process are also reported to it when it watches
those procs (it spawned them), since it can answer with the exit status; otherwise they are
answered with the transport's error after `_FOREIGN_GRACE`. Not covered: ports handed in spawn
arguments or inside `Port.send` messages.

A CALL without a reply port that cannot be delivered bounces back to its sender through
`on_undeliverable` (the sending actor's `_handle_undeliverable_message`, or the fault hook at the
root); a CALL with a reply port fails that port.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Protocol

from monarch._src.config import duration_seconds
from monarch._src.runtime.control import ControlTable, PortsHanded, control
from monarch._src.runtime.envelope import (
    PORT,
    PORT_ERROR,
    PORT_VALUE,
    Call,
    Control,
    Envelope,
    PortAddr,
    PortMsg,
    as_record,
    copy_payload,
    encode,
)
from monarch._src.runtime.hook import Hook, Slot
from monarch._src.runtime.ports import PortEntry
from monarch._src.supervision.errors import SupervisionError
from monarch._src.transport.comm import Transport, TransportFactory

__all__ = [
    "PENDING_PREFIX",
    "LostDelegate",
    "Mailbox",
    "PeerLostHook",
    "UndeliverableHook",
    "is_pending",
    "pending_key",
]

logger = logging.getLogger(__name__)

# Routing keys of procs whose address is not known yet ("pending:<proc_id>"): `pending_key`
# makes one, `is_pending` tells one; only they and the mailbox's routing read the prefix.
PENDING_PREFIX = "pending:"


def pending_key(proc_id: str) -> str:
    """The routing key of proc `proc_id` until its address is known (`Mailbox.resolve`)."""
    return PENDING_PREFIX + proc_id


def is_pending(key: str) -> bool:
    """Whether routing key `key` names a proc whose address is not known yet."""
    return key.startswith(PENDING_PREFIX)


# A post-queue item that records reply ports handed to peers in call arguments (not an address).
_HANDED: Any = "handed:"
# How many handed ports are remembered per peer; older ones are forgotten (memory stays bounded).
_HANDED_MAX = 1024
# A process that only saw its connection to a dead peer break waits this long before answering
# ports of other processes handed to that peer: the port's owner, told of the handing, answers
# first with the exit status when it watches that proc (it usually spawned it).
_FOREIGN_GRACE = 1.0
# How long a message for an actor key not (yet) registered here waits for it before it is
# refused: a mesh that one process spawned can be called by another (the spawner returned it)
# before the spawn arrives, since two senders are not ordered with each other.
_UNBORN_GRACE = 10.0

Written = Callable[[], None] | None
# What to do with an actor once it is registered here, and what if it never is (`when_actor`).
_Waiter = tuple[Callable[["Inbox"], None], Callable[[], None]]
# A port handed to another proc in a call's arguments: (port address, rank, once).
Handed = tuple[PortAddr, "int | None", bool]


class PeerLostHook(Protocol):
    """`Mailbox.on_peer_lost`'s callbacks: `hook(peer, why)` on the loop, once `peer` is marked
    dead; one that raises stops the callbacks after it (a bug of that callback)."""

    def __call__(self, peer: str, why: BaseException, /) -> None: ...


class LostDelegate(Protocol):
    """`Mailbox.lost_delegate`: asked (on the loop) when the connection to `peer` breaks; True
    means "that process is watched; the watcher will call mark_dead with the reason"."""

    def __call__(self, peer: str, why: BaseException, /) -> bool: ...


class UndeliverableHook(Protocol):
    """`Mailbox.on_undeliverable`: `hook(call, why)` on the loop with a CALL envelope without
    reply port that could not be delivered."""

    def __call__(self, call: Call, why: BaseException, /) -> None: ...


class _Countdown:
    """Lets one thread wait until `n` envelopes were written."""

    def __init__(self, n: int) -> None:
        self._left = n
        self._lock = threading.Lock()
        self._done = threading.Event()

    def tick(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._done.set()

    def wait(self) -> None:
        # Bounded: a peer that never comes up is failed by then, which also ticks.
        self._done.wait(duration_seconds("message_delivery_timeout"))


class Inbox(Protocol):
    """What the mailbox needs from an actor living in this process."""

    def enqueue(self, env: Call) -> None: ...


class Mailbox:
    """The router of one process. Fields are touched on the loop thread unless noted."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 transport_factory: TransportFactory = Transport) -> None:
        """`transport_factory(on_batch, on_lost)` builds this process's transport: the
        `Transport` of `transport/comm.py` unless a test or a deployment passes its own."""
        self.loop = loop
        self.address = ""  # the transport's listen address, once started
        self.transport = transport_factory(self._on_batch, self._on_lost)
        self.actors: dict[str, Inbox] = {}  # actor key -> actor living here (`add_actor`)
        # Actor key not registered yet -> (expiry timer, [(found, missing)] in arrival order).
        self._unborn: dict[str, tuple[asyncio.TimerHandle, list[_Waiter]]] = {}
        self.control = ControlTable()  # control operation -> handler, registered at start-up
        self._ports: dict[int, PortEntry] = {}  # open ports of this process (any thread adds)
        self._port_ids = itertools.count(1)
        self._port_peers: dict[int, tuple[str, ...]] = {}  # port -> peers that owe it replies
        self._waiting: dict[str, set[int]] = {}  # peer -> ports waiting on a reply from it
        # Posts from any thread: (address, envelope, called once written or failed, or None).
        self._outq: deque[tuple[str, Any, Written]] = deque()
        self._wake_pending = False  # a _flush is scheduled on the loop
        self._flushing = False  # the loop is routing what it took from `_outq`
        # Ports' peers to watch (`open_port`), registered by the loop before it next handles
        # a batch, a lost peer or a flush: a port costs no wake-up of its own.
        self._watches: deque[tuple[int, tuple[str, ...]]] = deque()
        self._alias: dict[str, str] = {}  # pending routing key -> resolved address
        # Pending key (or a peer whose death is being confirmed) -> (envelope, written), in order.
        self._held: dict[str, list[tuple[Envelope, Written]]] = {}
        self._dead: dict[str, BaseException] = {}  # peers known gone -> why
        # Dead peer -> its transport's incarnation when it died ("" if never heard): another
        # process heard later at that address is not the dead one (`_peer_hello`).
        self._dead_incarnation: dict[str, str] = {}
        # Peer -> ports (address, rank) -> once, that this process handed to it in call
        # arguments, oldest first: answered with the failure if the peer dies (`ports_handed`).
        self._handed: dict[str, OrderedDict[tuple[PortAddr, int | None], bool]] = {}
        self._expected_exit: dict[str, BaseException] = {}  # peers told to exit -> what to report
        self.on_peer_lost: Hook[PeerLostHook] = Hook("on_peer_lost", "Told of each dead peer.")
        # Asked when the connection to a peer breaks: True means "that process is watched; the
        # watcher will call mark_dead with the reason". Empty: mark it dead at once.
        self.lost_delegate: Slot[LostDelegate] = Slot(
            "lost_delegate", "Asked whether a peer whose connection broke is watched.")
        self.loop_thread: threading.Thread | None = None  # set by the runtime that runs `loop`
        # Called (on the loop) with a CALL envelope without reply port that could not be
        # delivered, and why; the proc agent hands it to the sending actor.
        self.on_undeliverable: Slot[UndeliverableHook] = Slot(
            "on_undeliverable", "Told of each CALL without reply port that could not go.")
        self.control.register(PortsHanded, self._ports_handed_here)
        self.transport.on_hello = self._peer_hello

    async def start(self, address: str | None = None) -> str:
        self.address = await self.transport.start(address)
        return self.address

    # ---- ports ------------------------------------------------------------------------------
    def open_port(self, entry: PortEntry, waits_on: tuple[str, ...] = ()) -> PortAddr:
        """Register `entry`; `waits_on` lists the peers whose death must fail it (any thread)."""
        port_id = next(self._port_ids)
        self._ports[port_id] = entry
        if waits_on:
            # Registered by the loop before it handles anything that could answer or fail this
            # port (a batch from a peer, a lost peer), so it needs no wake-up of its own.
            self._watches.append((port_id, waits_on))
            dead = self._dead
            if dead:  # (none is, mostly)
                alias = self._alias
                if any(alias.get(peer, peer) in dead for peer in waits_on):
                    self._wake()  # nothing else may come to fail it
        return (self.address, port_id)

    def _register_watches(self) -> None:
        """Register the ports' peers that `open_port` queued (loop)."""
        watches = self._watches
        while watches:
            self._watch_port(*watches.popleft())

    def _watch_port(self, port_id: int, peers: tuple[str, ...]) -> None:
        entry = self._ports.get(port_id)
        if entry is None or entry.closed:
            return
        alias, dead = self._alias, self._dead
        # The most frequent: one peer (a call_one), alive and under its own address.
        if len(peers) != 1 or peers[0] in alias or peers[0] in dead:
            live = []
            for peer in peers:
                peer = alias.get(peer, peer)
                if peer in dead:
                    entry.fail(_as_supervision_error(dead[peer]))
                    if entry.closed:
                        self._close_port(port_id)
                        return
                else:
                    live.append(peer)
            peers = tuple(live)
        self._port_peers[port_id] = peers
        all_waiting = self._waiting
        for peer in peers:
            waiting = all_waiting.get(peer)
            if waiting is None:
                waiting = all_waiting[peer] = set()
            waiting.add(port_id)

    def ports_handed(self, ports: list[Handed], peers: tuple[str, ...], watcher: str) -> None:
        """Ports `(address, rank, once)` go to `peers` in a call's arguments (any thread, before
        posting that call); `watcher` is the address of the process that watches those procs
        (their owner). If one of those procs dies, this process answers each reply port
        (once) with the failure, so whoever waits on it is not left hanging; when the proc
        failed (`proc_failed`, not a stop), multi-use ports get the failure too, as a failed
        actor answers the ports it held. An answer that arrived first wins (a reply port takes
        one answer per rank); the newest `_HANDED_MAX` per peer are remembered."""
        self._enqueue(_HANDED, (ports, peers, watcher), None)

    def _ports_handed_here(self, sender: str, op: PortsHanded, reply: PortAddr | None) -> None:
        """The process that handed ports of this one to `peers` tells this one, their watcher:
        answer them with the exit status if those procs die."""
        self._record_handed(op.ports, op.peers)

    def _record_handed(self, ports: list[Handed], peers: tuple[str, ...],
                       watcher: str | None = None) -> None:
        owned = [port for port in ports if port[0][0] == watcher]
        if owned and watcher is not None and watcher != self.address:
            # The watcher owns some of the ports: it learns of it too, and answers them with
            # the exit status, which a broken connection here cannot tell. Another process
            # neither watches those procs nor may assume a dead proc it once knew at one of
            # their addresses is the same one (the OS reuses ports).
            known = tuple(self._alias.get(peer, peer) for peer in peers)
            known = tuple(peer for peer in known if not peer.startswith(PENDING_PREFIX))
            if known:
                self.post(watcher, control(PortsHanded(owned, known)))
        for peer in peers:
            peer = self._alias.get(peer, peer)
            if peer in self._dead:
                self._answer_handed([p for p in ports if p[2]], self._dead[peer])
                continue
            record = self._handed.get(peer)
            if record is None:
                record = self._handed[peer] = OrderedDict()
            for addr, rank, once in ports:
                record[(addr, rank)] = once
                record.move_to_end((addr, rank))
            while len(record) > _HANDED_MAX:
                record.popitem(last=False)

    def _answer_handed(self, ports: list[Handed], err: BaseException) -> None:
        error = encode(_as_supervision_error(err))
        for (addr, port_id), rank, _once in ports:
            if addr == self.address:
                entry = self._ports.get(port_id)
                if entry is None or entry.closed:
                    continue  # already answered
            self.post(addr, PortMsg(PORT, port_id, error, rank, PORT_ERROR))

    def proc_failed(self, peer: str, err: BaseException) -> None:
        """The proc at `peer` failed (its watcher's report, not a stop): every port handed to
        it, multi-use ones included, gets `err`; then it is dead (`mark_dead`) (loop)."""
        handed = self._handed.pop(self._alias.get(peer, peer), None)
        if handed:
            self._answer_handed([(p[0], p[1], once) for p, once in handed.items()], err)
        self.mark_dead(peer, err)

    def fail_port(self, port: PortAddr, err: BaseException) -> None:
        """End a port of this process with `err` where a reply is still due (any thread)."""
        self.loop.call_soon_threadsafe(self._fail_port, port[1], err)

    def _fail_port(self, port_id: int, err: BaseException) -> None:
        entry = self._ports.get(port_id)
        if entry is not None:
            entry.fail(err)
            self._close_port(port_id)

    def close_port(self, port: PortAddr) -> None:
        """Forget a port; later replies to it are dropped (any thread)."""
        self.loop.call_soon_threadsafe(self._close_port, port[1])

    def _close_port(self, port_id: int, answered: str | None = None) -> None:
        """Drop the port and its watches; `answered`: the peer whose reply closed it, whose
        watch `_port_msg` dropped already (nothing is left to unwatch when it was the only
        one)."""
        self._ports.pop(port_id, None)
        peers = self._port_peers.pop(port_id, None)
        if peers and (len(peers) != 1 or peers[0] != answered):
            alias, all_waiting = self._alias, self._waiting
            for peer in peers:
                waiting = all_waiting.get(alias.get(peer, peer))
                if waiting is not None:
                    waiting.discard(port_id)

    # ---- sending ----------------------------------------------------------------------------
    def post(self, addr: str, env: Envelope, written: Written = None) -> None:
        """Send `env` to the process at `addr` (any thread); order per calling thread is kept.

        `written()` is called (on the loop) once the envelope left this process or could not.

        A call or reply without out-of-band buffers, posted by a thread other than the loop's
        while nothing is queued for the loop, is written to the peer's socket by the posting
        thread itself (`Transport.send_direct`): one thread hop less each way. Anything posted
        before it is then already on the socket or in the peer's queue, which `send_direct`
        checks, so the order per thread is kept.
        """
        if addr == self.address:
            env = _private_copy(env)
        elif (written is None and not self._outq and not self._flushing
              and (type(env) is Call or type(env) is PortMsg)):
            loop_thread = self.loop_thread
            payload = env.payload  # (bytes, out-of-band buffers); a relay's batch is a list
            if (loop_thread is not None and loop_thread.ident != threading.get_ident()
                    and type(payload) is tuple and not payload[1]
                    and self.transport.send_direct(self._alias.get(addr, addr), env)):
                return
        self._enqueue(addr, env, written)

    def _enqueue(self, addr: str, item: Any, written: Written) -> None:
        """Queue an envelope, or a `_HANDED` record, for the loop (any thread)."""
        self._outq.append((addr, item, written))
        self._wake()

    def _wake(self) -> None:
        """Have the loop run `_flush` soon, unless it is scheduled already (any thread)."""
        if not self._wake_pending:
            self._wake_pending = True
            self.loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        self._wake_pending = False
        self._flushing = True
        try:
            self._register_watches()
            q = self._outq
            # A run of posts to one address (a burst of calls to one proc) is routed once: the
            # envelopes after the first go straight behind it in that peer's queue.
            run_addr: Any = None
            run_queue: list[Envelope] | None = None
            while q:
                addr, env, written = q.popleft()
                if addr is run_addr and written is None:
                    run_queue.append(env)  # type: ignore[union-attr]
                    continue
                if addr is _HANDED:
                    self._record_handed(*env)
                    run_addr = None
                    continue
                run_queue = self._route(addr, env, written)
                run_addr = addr if run_queue is not None else None
            self.transport.flush()
        finally:
            self._flushing = False

    def _route(self, addr: str, env: Envelope, written: Written = None) -> list[Envelope] | None:
        """Route one envelope (loop); returns the peer queue it went to the end of, if it did:
        an envelope posted right after it to the same address may go straight behind it."""
        addr = self._alias.get(addr, addr)
        if addr.startswith(PENDING_PREFIX) and addr not in self._dead:
            self._held.setdefault(addr, []).append((env, written))
            return None
        if addr == self.address:
            self._dispatch(self.address, env)  # already a private copy (see post)
        elif addr in self._dead:
            self._undeliverable(addr, env, self._dead[addr])
        else:
            return self.transport.send(addr, env, written)
        if written is not None:
            written()
        return None

    def post_all(self, posts: list[tuple[str, Envelope]], payload: Any) -> None:
        """Post envelopes that share `payload`; when it has out-of-band buffers (which point at
        the sender's memory), return only once they were written, so the caller may change its
        arrays or tensors as soon as the call returns. On the loop thread, where waiting would
        deadlock, the buffers are copied instead."""
        if not payload[1] or not posts:
            for addr, env in posts:
                self.post(addr, env)
            return
        if threading.current_thread() is self.loop_thread:
            for addr, env in posts:
                self.post(addr, _private_copy(env))
            return
        done = _Countdown(len(posts))
        for addr, env in posts:
            self.post(addr, env, done.tick)
        done.wait()

    def post_waiting(self, addr: str, env: Call | PortMsg) -> None:
        """`post_all` of one call or reply: `post`, and when its payload has out-of-band
        buffers, return only once they were written (without the list `post_all` takes)."""
        if env.payload[1]:
            self.post_all([(addr, env)], env.payload)
        else:
            self.post(addr, env)

    def resolve(self, pending_key: str, addr: str) -> None:
        """The proc known as `pending_key` listens at `addr`: release what was held (loop).

        A new proc may listen on the port of one that ended earlier (the OS reuses ports): what
        was known about the old process at that address no longer applies.
        """
        self._register_watches()
        self.revive(addr)
        for port_id in self._waiting.pop(pending_key, set()):
            self._waiting.setdefault(addr, set()).add(port_id)
        handed = self._handed.pop(pending_key, None)
        if handed is not None:
            self._record_handed([(p[0], p[1], once) for p, once in handed.items()], (addr,))
        for env, written in self._held.pop(pending_key, []):
            self._route(addr, env, written)
        # Only now may other threads reach `addr` under its key (`post` writes to a resolved
        # address directly): what was held for it is in the peer's queue first.
        self._alias[pending_key] = addr

    # ---- receiving --------------------------------------------------------------------------
    def _on_batch(self, peer: str, envs: list[tuple[Any, ...]]) -> None:
        for env in envs:
            try:
                if env[0] == PORT:  # the most frequent: a reply (no record built for it)
                    self._port_msg(peer, env[1], env[2], env[3], env[4])
                else:
                    self._dispatch(peer, as_record(env))  # the wire carries plain tuples
            except Exception:  # one bad envelope must not cost the rest of the connection
                logger.exception("monarch: could not dispatch an envelope from %s", peer)
        self.transport.flush()

    def _port_msg(self, peer: str, port_id: int, payload: Any, rank: int | None,
                  status: int) -> None:
        """A `PortMsg`'s fields: deliver them to the port (loop)."""
        if self._watches:  # a reply must find its port's peers registered
            self._register_watches()
        entry = self._ports.get(port_id)
        if entry is None:
            return  # a late reply to a port nobody reads any more
        # A peer owes each port it was asked at most one reply: once it answered, its
        # death no longer concerns this port.
        waiting = self._waiting.get(peer)
        if waiting is not None:
            waiting.discard(port_id)
        entry.deliver(payload, rank, status)
        if entry.closed:
            self._close_port(port_id, peer)

    def _dispatch(self, peer: str, env: Envelope) -> None:
        if type(env) is PortMsg:
            self._port_msg(peer, env.port_id, env.payload, env.rank, env.status)
        elif type(env) is Call:
            self._deliver_call(env)
        elif type(env) is Control:
            self.run_control(peer, env)

    def run_control(self, peer: str, env: Control) -> None:
        """Hand `env` to the handler of its operation; a failure is logged and answered to its
        reply port, an operation this process does not know only logged (loop)."""
        reply = env.reply
        try:
            found = self.control.resolve(env)
            if found is None:
                logger.error("monarch: unknown control operation %r from %s", env.op, peer)
                return
            handler, op = found
            handler(peer, op, reply)
        except Exception as exc:
            logger.exception("monarch: control operation %r failed", env.op)
            if reply is not None:
                self.reply_error(reply, exc)

    def _deliver_call(self, env: Call) -> None:
        actor = self.actors.get(env.actor_key)
        if actor is not None:  # a registered key has nothing waiting for it (`add_actor`)
            actor.enqueue(env)
        else:
            self.when_actor(
                env.actor_key, lambda actor: actor.enqueue(env),
                lambda: self._reject(
                    env, f"actor {env.actor_key} does not exist on this proc ({self.address})."),
            )

    def when_actor(self, key: str, found: Callable[[Inbox], None],
                   missing: Callable[[], None]) -> None:
        """found(actor) once actor `key` is registered here, after everything that waited for it
        before; missing() if it is not registered within `_UNBORN_GRACE` (loop)."""
        waiting = self._unborn.get(key)
        if waiting is not None:
            waiting[1].append((found, missing))
            return
        actor = self.actors.get(key)
        if actor is not None:
            found(actor)
            return
        timer = self.loop.call_later(_UNBORN_GRACE, self._never_born, key)
        self._unborn[key] = (timer, [(found, missing)])

    def add_actor(self, key: str, actor: Inbox) -> None:
        """Register `actor` under `key` and hand it what arrived for it before (loop)."""
        self.actors[key] = actor
        waiting = self._unborn.pop(key, None)
        if waiting is not None:
            waiting[0].cancel()
            for found, _missing in waiting[1]:
                found(actor)

    def _never_born(self, key: str) -> None:
        for _found, missing in self._unborn.pop(key, (None, []))[1]:
            missing()

    def _reject(self, env: Call, report: str) -> None:
        if env.reply is not None:
            self.reply_error(env.reply, SupervisionError(report), rank=env.rank)

    # ---- replies ----------------------------------------------------------------------------
    def reply(self, port: PortAddr, value: Any, rank: int | None = None) -> None:
        payload = encode(value)
        self.post_waiting(port[0], PortMsg(PORT, port[1], payload, rank, PORT_VALUE))

    def reply_error(self, port: PortAddr, exc: BaseException, rank: int | None = None) -> None:
        self.post(port[0], PortMsg(PORT, port[1], encode(exc), rank, PORT_ERROR))

    # ---- failures ---------------------------------------------------------------------------
    def expect_exit(self, peer: str, err: BaseException) -> None:
        """`peer` was asked to exit: report `err`, not a transport failure, once it is gone."""
        self._expected_exit[peer] = err

    def _on_lost(self, peer: str, lost: list[Envelope], err: BaseException) -> None:
        self._register_watches()
        if peer in self._dead:
            for env in lost:
                self._undeliverable(peer, env, self._dead[peer])
            return
        if peer in self._expected_exit:
            self.mark_dead(peer, self._expected_exit.pop(peer))
        elif (delegate := self.lost_delegate.get()) is not None and delegate(peer, err):
            # Whoever watches that process reports why it ended (a broken connection says
            # less than "Killed(sig=9)"); it calls mark_dead soon. Hold what could not go.
            self._held.setdefault(peer, []).extend((env, None) for env in lost)
            return
        else:
            self.mark_dead(peer, err)
        for env in lost:
            self._undeliverable(peer, env, self._dead[peer])

    def is_dead(self, peer: str) -> bool:
        return peer in self._dead

    def revive(self, addr: str) -> None:
        """A new process listens at `addr` (a proc this one spawned, a host it attaches to, one
        heard with another incarnation): what was known of a dead one there no longer applies
        (loop)."""
        self._dead.pop(addr, None)
        self._dead_incarnation.pop(addr, None)
        self._expected_exit.pop(addr, None)

    def _peer_hello(self, addr: str, incarnation: str) -> None:
        """The transport heard `incarnation` at `addr`: if that is not the process that died
        there, the address lives again (loop)."""
        if addr in self._dead and self._dead_incarnation.get(addr) != incarnation:
            self.revive(addr)

    def mark_dead(self, peer: str, err: BaseException) -> None:
        """`peer` is gone: fail what waits on it, and later sends to it at once (loop)."""
        if peer in self._dead:
            return
        self._register_watches()
        self._dead[peer] = err
        self._dead_incarnation[peer] = self.transport.incarnations.get(peer, "")
        self.transport.forget_peer(peer)
        for env, written in self._held.pop(peer, []):
            self._undeliverable(peer, env, err)
            if written is not None:
                written()
        for port_id in self._waiting.pop(peer, set()):
            entry = self._ports.get(port_id)
            if entry is not None:
                entry.fail(_as_supervision_error(err))
                if entry.closed:
                    self._close_port(port_id)
        handed = self._handed.pop(peer, None)
        if handed:
            # Reply ports only: a peer gone without a failure report may have been stopped.
            once = [(p[0], p[1], True) for p, is_once in handed.items() if is_once]
            if isinstance(err, SupervisionError):  # a watcher's report: the exit status
                self._answer_handed(once, err)
            else:
                own = [p for p in once if p[0][0] == self.address]
                others = [p for p in once if p[0][0] != self.address]
                self._answer_handed(own, err)
                if others:
                    self.loop.call_later(_FOREIGN_GRACE, self._answer_handed, others, err)
        for callback in self.on_peer_lost:
            callback(peer, err)

    def _undeliverable(self, peer: str, env: Envelope, err: BaseException) -> None:
        if type(env) is Call:
            if env.reply is None:
                # No one waits for an answer: the message bounces back to its sender.
                undeliverable = self.on_undeliverable.get()
                if undeliverable is not None:
                    undeliverable(env, err)
                return
            self._reject(env, f"the proc at {peer} is unreachable: {err}")
        elif type(env) is Control and env.reply is not None:
            self.reply_error(env.reply, _as_supervision_error(err))

    async def close(self) -> None:
        await self.transport.close()


def _private_copy(env: Envelope) -> Envelope:
    """Inside one process the receiver must still get its own copy of the arguments, taken
    when they are sent (the sender may change its buffers right after)."""
    if isinstance(env, Control) or not env.payload[1]:  # no out-of-band buffer: nothing shared
        return env
    return env._replace(payload=copy_payload(env.payload))


def _as_supervision_error(err: BaseException) -> SupervisionError:
    if isinstance(err, SupervisionError):
        return err
    return SupervisionError(f"the process this actor was running on failed: {err}")


