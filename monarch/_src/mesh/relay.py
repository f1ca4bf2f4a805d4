"""Casts as a tree: one envelope per host, handed to that host's procs by a relay proc there.

When the `cast_tree` config key says so (`auto`: the proc mesh spans two or more hosts, as
`ProcTable.hosts` records them, not all on this machine, with `TREE_MIN_RANKS` procs or more;
`always`; `off`), `casting` hands a cast's CALLs (and the
`cancel`, `stop_actor` and `upgrade_actor` controls that must follow them) to `post` here
instead of posting one per rank. `post` groups them by host and sends each group to the host's
*relay*, the proc with the lowest global rank on that host that is up and has not failed (so
every view and every actor mesh of a proc mesh uses the same relay), as one `relay` control
carrying the envelopes as plain tuples: pickled together, they carry their shared payload once.

The relay (`relay` control, installed by the proc agent) posts the envelopes for the other procs
of its host, and delivers its own once those were written (an endpoint that ends the process
must not keep the cast from the others), after the ones delivered to it before. For a `call()`
(a `GatherPort` reply, `gather` set) it opens a `BatchPort` that gathers the host's replies and
sends them back as one `PORT_BATCH` message; a proc that dies before answering answers its
ranks with the `SupervisionError`. `stream` and single calls keep their own reply ports (one
reply per rank), `broadcast` has none.

Order: links are FIFO per (sender process, receiver process), so once casts to a proc mesh go
through the tree, every CALL from this process to those procs (call_one and choose included, and
those to the relay itself) takes its host's relay. Until the proc mesh is up (its routing keys
resolved) tree casts wait in order behind `ProcTable.ready` (`Hosts.gate`). The caller's reply
port watches the target procs and the relays (`watched`), so a relay that dies fails the call as
a target proc would.

Switching `cast_tree` while calls are in flight does not keep that order.
`benchmarks/cast_tree.py` (4 hosts x 4 procs): 16 envelopes become 4 and the bytes per `call()`
halve, for a p50 1.05x-1.2x on loopback (one hop more; see `TREE_MIN_RANKS`). Not built:
reducing the replies at the relay (it needs an associative `combine`, a new adverb option), and
trees within one host (the relay sends one envelope per proc of its host).
"""

from __future__ import annotations

import pickle
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from monarch._src.config import get as config_get
from monarch._src.mesh.control_ops import Cancel, Relay, RelayBounced, RelayCast
from monarch._src.runtime.control import control, record_of
from monarch._src.runtime.envelope import (
    PORT,
    PORT_BATCH,
    PORT_ERROR,
    Call,
    Control,
    Envelope,
    Payload,
    PortAddr,
    PortMsg,
    as_record,
    copy_payload,
    encode,
)
from monarch._src.runtime.mailbox import Mailbox
from monarch._src.runtime.ports import PortEntry
from monarch._src.runtime.runtime import get_runtime
from monarch._src.supervision.errors import SupervisionError

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcTable

__all__ = ["BatchPort", "Hosts", "cast", "hosts_of", "install", "post", "watched"]


class Hosts:
    """The hosts of one proc table: its ranks by host, and the gate that holds tree casts, in
    order, until the table's procs are up (their routing keys resolved)."""

    def __init__(self, table: ProcTable) -> None:
        self.host_of: list[int] = table.hosts or [0] * len(table.keys)
        self.ranks_on: dict[int, list[int]] = {}  # host -> its global ranks, ascending
        for rank, host in enumerate(self.host_of):
            self.ranks_on.setdefault(host, []).append(rank)
        self.count = len(self.ranks_on)
        # id(plan ranks) -> (those ranks, their targets by host, their targets not up): the
        # targets of whole-view casts, once the procs are up (`targets`).
        self._views: dict[int, tuple[list[int], dict[int, list[tuple[str, int]]],
                                     list[tuple[int, int]]]] = {}
        self._lock = threading.Lock()
        self._held: list[Callable[[], None]] | None = None  # sends waiting for `ready`
        if not table.ready.done():
            self._held = []
            loop = get_runtime().mailbox.loop
            table.ready.add_done_callback(lambda _: loop.call_soon_threadsafe(self._open))

    def relay(self, host: int, table: ProcTable, mailbox: Mailbox) -> int | None:
        """The global rank of `host`'s relay: its lowest rank that is up and not known to be
        gone (failed, or its connection lost); None when there is none."""
        keys = table.keys
        for rank in self.ranks_on[host]:
            if (rank not in table.failed and table.is_up(rank)
                    and not mailbox.is_dead(keys[rank])):
                return rank
        return None

    def watch_key(self, host: int, table: ProcTable, mailbox: Mailbox) -> str | None:
        """The routing key of `host`'s relay, or of the proc that will be once it is up."""
        relay = self.relay(host, table, mailbox)
        if relay is not None:
            return table.keys[relay]
        for rank in self.ranks_on[host]:
            if rank not in table.failed and not table.is_up(rank):
                return table.keys[rank]
        return None

    def targets(self, table: ProcTable, ranks: list[int], local_ranks: Iterable[int] | None
                ) -> tuple[dict[int, list[tuple[str, int]]], list[tuple[int, int]]]:
        """The targets of a cast to the view ranks `local_ranks` (default all) of a view whose
        global proc ranks are `ranks`: (address, view rank) by host, and (global rank, view rank)
        of those whose proc never came up. Kept for whole-view casts once the procs are up, so
        such a cast costs the caller one step per host."""
        cacheable = local_ranks is None and self._held is None
        if cacheable:
            hit = self._views.get(id(ranks))
            if hit is not None and hit[0] is ranks:
                return hit[1], hit[2]
        keys = table.keys
        groups: dict[int, list[tuple[str, int]]] = {}
        never_up: list[tuple[int, int]] = []
        for local in range(len(ranks)) if local_ranks is None else local_ranks:
            g = ranks[local]
            if not table.is_up(g):
                never_up.append((g, local))
            else:
                groups.setdefault(self.host_of[g], []).append((keys[g], local))
        if cacheable:
            if len(self._views) >= _VIEWS_KEPT:
                self._views.clear()
            self._views[id(ranks)] = (ranks, groups, never_up)
        return groups, never_up

    @property
    def waiting(self) -> bool:
        """Whether casts are still held until the procs are up."""
        return self._held is not None

    def gate(self, send: Callable[[], None]) -> bool:
        """Keep `send` until the procs are up (or one failed), behind the casts kept before it,
        and return True; return False when they are up (the caller sends now)."""
        if self._held is None:
            return False
        with self._lock:
            if self._held is None:
                return False
            self._held.append(send)
            return True

    def _open(self) -> None:
        """The procs are up, or one failed (loop): post the held casts in order."""
        with self._lock:
            for send in self._held or ():
                send()
            self._held = None  # after the held ones: a cast that sees None posts behind them


_VIEWS_KEPT = 64  # views whose targets a `Hosts` keeps
_tables: weakref.WeakKeyDictionary[ProcTable, Hosts] = weakref.WeakKeyDictionary()
_tables_lock = threading.Lock()


# `cast_tree="auto"` takes the tree for a proc mesh on two or more hosts, not all on this
# machine, with at least this many procs in all. Measured with `benchmarks/cast_tree.py --sweep`
# (`benchmarks/results/2026-12-06-cast-tree-sweep.json`, loopback hosts on 2 cores): from 8
# procs (2x4, 4x2) the tree cuts the caller's CPU per `call()` (0.68x-0.78x, down to 0.37x at
# 4x16), below it costs more (1.36x at 2x1, 1.05x at 2x2). Its p50 lost at every size there
# (1.05x-1.6x from 2 to 64 procs): relays on the caller's own machine share its cores and add a
# hop, so hosts that are all this machine (`ProcTable.one_machine`) keep the flat cast.
TREE_MIN_RANKS = 8


def hosts_of(table: ProcTable) -> Hosts | None:
    """The hosts of `table` when casts to its procs go through the tree (`cast_tree`), else
    None. The answer is the same for every call to the table's procs (what the order of casts
    through the relays relies on) while the config key is unchanged."""
    mode = config_get("cast_tree")
    if mode == "off" or (mode == "auto" and (table.hosts is None  # None: all on one host
                                             or table.one_machine
                                             or len(table.keys) < TREE_MIN_RANKS)):
        return None
    hosts = _tables.get(table)
    if hosts is None:
        with _tables_lock:
            hosts = _tables.get(table)
            if hosts is None:
                hosts = _tables[table] = Hosts(table)
    if mode == "auto" and hosts.count < 2:
        return None
    return hosts


def watched(table: ProcTable, hosts: Hosts, ranks: list[int]) -> tuple[str, ...]:
    """The routing keys a reply port of a cast to global `ranks` waits on: the target procs and
    the relays of their hosts."""
    keys = table.keys
    found = {keys[g] for g in ranks}
    mailbox = get_runtime().mailbox
    for host in {hosts.host_of[g] for g in ranks}:
        relay = hosts.watch_key(host, table, mailbox)
        if relay is not None:
            found.add(relay)
    return tuple(found)


def cast(table: ProcTable, hosts: Hosts, ranks: list[int], local_ranks: Iterable[int] | None,
         template: Call, payload: Payload, gather: Any = None) -> None:
    """Post the CALL `template` (its rank set per target) to the view ranks `local_ranks` (default
    all) of a view whose global proc ranks are `ranks`: one `relay_cast` control per host
    carrying the CALL once and its (address, view rank) targets. `gather` as for `post`."""
    mailbox = get_runtime().mailbox
    if hosts.waiting and payload[1]:
        # Likely held past this call, and the caller may change its arrays once it returns.
        payload = copy_payload(payload)
        template = template._replace(payload=payload)
    if local_ranks is not None:
        local_ranks = list(local_ranks)

    def send() -> None:
        groups, never_up = hosts.targets(table, ranks, local_ranks)
        extent = template.cast_rank[1:]
        keys = table.keys
        posts: list[tuple[str, Envelope]] = [
            (keys[g], template._replace(cast_rank=(local, *extent))) for g, local in never_up]
        raw = tuple(template)
        for host, targets in groups.items():
            relay = hosts.relay(host, table, mailbox)
            if relay is None:  # no live proc there: they fail as flat casts do
                posts.extend((addr, template._replace(cast_rank=(local, *extent)))
                             for addr, local in targets)
            else:
                posts.append((keys[relay], control(RelayCast(gather, raw, targets))))
        mailbox.post_all(posts, payload)

    if not hosts.gate(send):
        send()


def post(table: ProcTable, hosts: Hosts, envs: list[tuple[int, Envelope]], payload: Payload,
         gather: Any = None) -> None:
    """Post `envs` (global proc rank, CALL or control) through the relays of their hosts.
    `gather`: the `GatherPort` every CALL replies to, whose replies each relay batches; None to
    keep each envelope's own reply. `payload`: the CALLs' shared payload (for `post_all`)."""
    mailbox = get_runtime().mailbox
    if hosts.waiting and payload[1]:
        # Likely held past this call, and the caller may change its arrays once it returns.
        payload = copy_payload(payload)
        envs = [(g, env._replace(payload=payload) if type(env) is Call else env)
                for g, env in envs]

    def send() -> None:
        mailbox.post_all(_by_host(mailbox, table, hosts, envs, gather), payload)

    if not hosts.gate(send):
        send()


def _by_host(mailbox: Mailbox, table: ProcTable, hosts: Hosts, envs: list[tuple[int, Envelope]],
             gather: Any) -> list[tuple[str, Envelope]]:
    """One `relay` control per host, to its relay. Envelopes for a target that never came up,
    or for a host without a live proc, are posted directly (they fail there, as flat casts do:
    a reply port gets the error, a broadcast bounces to its sender)."""
    keys = table.keys
    groups: dict[int, list[tuple[int, Envelope]]] = {}
    posts: list[tuple[str, Envelope]] = []
    for g, env in envs:
        if not table.is_up(g):
            posts.append((keys[g], env))
        else:
            groups.setdefault(hosts.host_of[g], []).append((g, env))
    for host, group in groups.items():
        relay = hosts.relay(host, table, mailbox)
        if relay is None:
            posts.extend((keys[g], env) for g, env in group)
            continue
        forwarded = [(keys[g], tuple(env)) for g, env in group]
        posts.append((keys[relay], control(Relay(gather, forwarded))))
    return posts


# ---- the relay's side --------------------------------------------------------------------
def _wrapped(payload: Payload) -> Payload:
    """A received payload, ready to be sent on: its buffers (views of the frames it came in)
    go out of band again."""
    data, buffers = payload
    if not buffers:
        return payload
    return data, [b if isinstance(b, pickle.PickleBuffer) else pickle.PickleBuffer(b)
                  for b in buffers]


class BatchPort(PortEntry):
    """The relay's port for one `call()`: gathers its host's replies (one per rank of `ranks`)
    and sends them to the caller's `GatherPort` at `gather` as one `PORT_BATCH` message. A target
    proc that dies first (`fail`) answers the ranks still due with the error."""

    def __init__(self, mailbox: Mailbox, gather: Any, ranks: list[int],
                 on_close: Callable[[], None]) -> None:
        self.mailbox = mailbox
        self.gather = gather
        self.due = set(ranks)
        self.batch: list[tuple[int, int, Payload]] = []
        self.on_close = on_close  # forgets the port in the relay's map

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        if self.closed or rank not in self.due:
            return
        self.due.discard(rank)
        self.batch.append((rank, status, _wrapped(payload)))
        if not self.due:
            self._send()

    def fail(self, exc: BaseException) -> None:
        if self.closed:
            return
        error = encode(exc if isinstance(exc, SupervisionError) else SupervisionError(str(exc)))
        self.batch.extend((rank, PORT_ERROR, error) for rank in sorted(self.due))
        self.due.clear()
        self._send()

    def _send(self) -> None:
        self.closed = True
        self.on_close()
        batch: Any = self.batch  # a PORT_BATCH payload
        self.mailbox.post(self.gather[0], PortMsg(PORT, self.gather[1], batch, None, PORT_BATCH))


def install(mailbox: Mailbox) -> None:
    """Register the relay's controls in `mailbox` (the proc agent does, in every process):
    `relay` (envelopes as plain tuples), `relay_cast` (one CALL and its targets) and
    `relay_bounced` (a broadcast a relay could not deliver, back at its sender's process)."""

    # A caller's GatherPort -> the BatchPort that gathers its replies here, while it is open: a
    # `cancel` of the call names the caller's port, the actors hold this one.
    batching: dict[Any, Any] = {}
    # The envelopes for this proc, in arrival order, each with the number of its cast's
    # envelopes to the other procs not yet written: one is delivered here once its cast left
    # (an endpoint that ends this process must not keep the cast from the others) and those
    # before it were delivered.
    local: deque[list[Any]] = deque()  # [writes still due, envelope, sender]

    def deliver_ready() -> None:
        while local and local[0][0] == 0:
            _, env, peer = local.popleft()
            _deliver_here(mailbox, peer, env)

    def relay(peer: str, op: Relay, reply: PortAddr | None) -> None:
        fan_out(peer, op.gather, [(addr, as_record(raw)) for addr, raw in op.forwarded])

    def relay_cast(peer: str, op: RelayCast, reply: PortAddr | None) -> None:
        template = as_record(op.call)
        assert type(template) is Call
        extent = template.cast_rank[1:]
        fan_out(peer, op.gather, [(addr, template._replace(cast_rank=(local, *extent)))
                                  for addr, local in op.targets])

    def fan_out(peer: str, gather: Any, forwarded: list[tuple[str, Envelope]]) -> None:
        here = mailbox.address
        port = None
        if gather is not None and gather[0] != here:
            gather = tuple(gather)
            ranks = [env.rank for _, env in forwarded if type(env) is Call]
            entry = BatchPort(mailbox, gather, ranks, lambda: batching.pop(gather, None))
            others = tuple({addr for addr, _ in forwarded if addr != here})
            port = batching[gather] = mailbox.open_port(entry, others)
        mine: list[Any] | None = None
        outgoing: list[tuple[str, Envelope]] = []
        payloads: dict[int, Payload] = {}  # received payload -> the one sent on (shared)
        for addr, env in forwarded:
            if type(env) is Call:
                sent = payloads.get(id(env.payload))
                if sent is None:
                    # From this very process the buffers are the caller's, who may change
                    # them once the control was dispatched: take a copy.
                    sent = copy_payload(env.payload) if peer == here else _wrapped(env.payload)
                    payloads[id(env.payload)] = sent
                env = env._replace(payload=sent, reply=env.reply if port is None else port)
            elif type(env) is Control and (cancel := record_of(env, Cancel)) is not None:
                batched = batching.get(tuple(cancel.port))
                if batched is not None:
                    env = control(cancel._replace(port=batched), env.reply)
            if addr == here:
                mine = [0, env, peer]
            elif (type(env) is Call and env.reply is None and peer != here
                  and mailbox.is_dead(addr)):
                # Nobody waits for it: it bounces to its sender's process, as it would have
                # bounced there had that process sent it.
                mailbox.post(peer, control(RelayBounced(tuple(env),
                                                        f"the proc at {addr} is gone")))
            else:
                outgoing.append((addr, env))
        if mine is None:
            for addr, env in outgoing:
                mailbox.post(addr, env)
            return
        mine[0] = len(outgoing)
        local.append(mine)

        def written() -> None:
            mine[0] -= 1
            if mine[0] == 0:
                deliver_ready()

        for addr, env in outgoing:
            mailbox.post(addr, env, written)
        deliver_ready()

    def relay_bounced(peer: str, op: RelayBounced, reply: PortAddr | None) -> None:
        call = as_record(op.call)
        undeliverable = mailbox.on_undeliverable.get()
        if undeliverable is not None and type(call) is Call:
            undeliverable(call, SupervisionError(op.why))

    mailbox.control.register(Relay, relay)
    mailbox.control.register(RelayCast, relay_cast)
    mailbox.control.register(RelayBounced, relay_bounced)


def _deliver_here(mailbox: Mailbox, peer: str, env: Envelope) -> None:
    """Hand an envelope for the relay's own proc over, as a direct one from `peer` would be."""
    if type(env) is Call:
        call = env._replace(payload=copy_payload(env.payload))  # the others still send it

        def missing() -> None:
            if call.reply is not None:
                mailbox.reply_error(call.reply, SupervisionError(
                    f"actor {call.actor_key} does not exist on this proc ({mailbox.address})."),
                    rank=call.rank)

        mailbox.when_actor(call.actor_key, lambda actor: actor.enqueue(call), missing)
    elif type(env) is Control:
        mailbox.run_control(peer, env)

