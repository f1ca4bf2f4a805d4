"""The casting seam: how a call to an actor mesh becomes one CALL envelope per target rank.

`Endpoint`'s adverbs use it, and so do features that send endpoint calls of their own (the
tensor engine sends calls whose replies go to its workers, and `rref` calls). It owns the two
things every call needs, built here and nowhere else:

* `plan(mesh)`: the `CastPlan`, what a cast needs to know about an actor mesh (the targets'
  global proc ranks and routing keys, the actors' key, the cast extent, the class and the proc
  mesh). Built once per mesh object and kept on it; an adverb looks it up once per call and
  passes it down (`cast=`).
* `encode_args(endpoint, args, kwargs)`: check the arguments against the endpoint's signature
  and pickle them once. Returns an `Encoded`: the payload together with the reply ports pickled
  inside it (a feature's encoder, installed in the `call_encoder` slot, may make the payload an
  object that posts itself).

and the operations on them:

* `target(endpoint)`: an `EndpointTarget`, the mesh, the method name, the label used in error
  messages and the endpoint's `propagate` function.
* `check(mesh, method)`: raise the `SupervisionError` a call to a stopped or failed mesh gets.
* `post_call(mesh, method, encoded, reply, targets, ...)`: refuse or post the CALLs.
* `cancel_call(mesh, reply, targets)`: withdraw the CALLs that reply to `reply` (`Future.cancel`).
* `post_control(mesh, control)`: post a control to the proc of every rank of `mesh`, on the
  path its CALLs take (`stop_actor`, `upgrade_actor`: they must not overtake them).

When the proc mesh spans several hosts (config `cast_tree`), the CALLs and cancels go through one
relay proc per host (`relay.py`), and `CastPlan.procs_of` names the relays too: a reply port waits
on them as on the target procs.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import pickle
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from monarch._src.mesh import hooks, observe, relay, traffic
from monarch._src.mesh.context import current_instance
from monarch._src.mesh.control_ops import Cancel
from monarch._src.mesh.port import start_handing, stop_handing
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import CALL, Call, Control, Envelope, encode
from monarch._src.runtime.runtime import get_runtime
from monarch._src.shape import Shape, Slice
from monarch._src.supervision.errors import SupervisionError, add_note
from monarch._src.telemetry import record
from monarch._src.transport import serialization

if TYPE_CHECKING:
    from monarch._src.mesh.actor_mesh import ActorMesh
    from monarch._src.mesh.endpoint import Endpoint
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.runtime.mailbox import Handed
    from monarch._src.runtime.ports import PortEntry

__all__ = [
    "CastPlan",
    "Encoded",
    "EndpointTarget",
    "cancel_call",
    "check",
    "encode_args",
    "plan",
    "post_call",
    "post_control",
    "post_one",
    "target",
]


class CastPlan(NamedTuple):
    """What a cast to an actor mesh (or a slice of one) needs.

    `ranks[i]` is the global proc rank (a rank of the proc table) of the view's rank `i`;
    `procs` is the proc table's live list of routing keys by global rank (a `pending:` key
    until the proc is up, then its address), so `procs[ranks[i]]` is where rank `i` lives.
    """

    ranks: list[int]  # global proc rank of each rank of the view, in order
    labels: tuple[str, ...]  # the cast extent (each CALL carries it with its rank)
    sizes: tuple[int, ...]
    procs: list[str]  # routing key per global proc rank (live: resolved in place)
    actor_key: str  # the actors' key in every proc's mailbox
    mesh_name: str  # the spawn name
    actor_class: type  # the actors' class
    proc_mesh: ProcMesh  # the (root) proc mesh the actors live on

    def proc_of(self, rank: int) -> str:
        """The routing key of the proc that holds rank `rank` of the view."""
        return self.procs[self.ranks[rank]]

    def procs_of(self, ranks: Iterable[int] | None = None) -> tuple[str, ...]:
        """The distinct routing keys of the procs a reply port of a cast to the given ranks
        (default: all) waits on: the procs of those ranks, and the relays of their hosts when
        casts to them go through the tree (`relay.py`)."""
        targets = self.ranks if ranks is None else [self.ranks[r] for r in ranks]
        table = self.proc_mesh._table
        hosts = relay.hosts_of(table)
        if hosts is not None:
            return relay.watched(table, hosts, targets)
        if len(targets) == 1:
            return (self.procs[targets[0]],)
        return tuple({self.procs[g] for g in targets})


class EndpointTarget(NamedTuple):
    """An endpoint, as a feature that sends its calls itself sees it."""

    mesh: ActorMesh[Any]
    method: str  # the endpoint's name on the actor class
    label: str  # "<mesh name>.<method>", as error messages name it
    propagate: Any  # `propagate=` of as_endpoint, else of the @endpoint; None if none


class Encoded(NamedTuple):
    """A call's arguments, encoded once (`encode_args`)."""

    payload: Any  # the pickled (args, kwargs), or a feature's payload that posts itself
    handed: list[Handed]  # the reply ports pickled inside it (empty: none)


def plan(mesh: ActorMesh[Any]) -> CastPlan:
    """The cast plan of `mesh`, built on first use and kept on the mesh object (a mesh whose
    class changes, `ActorMesh.upgrade`, drops it)."""
    cast = mesh._plan
    if cast is None:
        shape = mesh._mesh_shape
        cast = mesh._plan = CastPlan(
            shape.ranks(), tuple(shape.labels), tuple(shape.ndslice.sizes),
            mesh._proc_mesh._table.keys, mesh._key, mesh._name, mesh._class, mesh._proc_mesh,
        )
    return cast


def target(endpoint: Endpoint[..., Any]) -> EndpointTarget:
    """The mesh, method, label and `propagate` of `endpoint`."""
    return EndpointTarget(endpoint._mesh, endpoint._name, endpoint._label(),
                          endpoint._propagate())


class _Binder:
    """Checks call arguments against an endpoint's signature, with a fast path for the common
    call with only positional arguments (binding costs more than the rest of a call)."""

    __slots__ = ("kw_required", "max_pos", "min_pos", "sig", "skip")

    def __init__(self, fn: Callable[..., Any], skip: int) -> None:
        self.sig = inspect.signature(fn)
        self.skip = skip  # leading parameters the caller does not pass (self, response port)
        params = list(self.sig.parameters.values())[skip:]
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.min_pos = sum(1 for p in positional if p.default is p.empty)
        varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
        self.max_pos = 1 << 30 if varargs else len(positional)
        self.kw_required = any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params)

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not kwargs and not self.kw_required and self.min_pos <= len(args) <= self.max_pos:
            return
        self.sig.bind(*((None,) * self.skip), *args, **kwargs)


_binders: dict[tuple[Any, int], _Binder] = {}


def encode_args(endpoint: Endpoint[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Encoded:
    """Check `args`/`kwargs` against the endpoint's signature and encode them once: a plain
    payload, or what the installed `call_encoder` made of them, with the reply ports pickled
    inside. A mismatch raises inspect's own `TypeError` ("missing a required argument: 'a'"),
    as on torchmonarch; a pickling error gets a note naming the endpoint."""
    binder = endpoint._binder
    if binder is None:
        key = (endpoint._method, 2 if endpoint._explicit else 1)
        binder = _binders.get(key)
        if binder is None:
            binder = _binders[key] = _Binder(*key)
        endpoint._binder = binder
    binder.check(args, kwargs)
    hook = hooks.call_encoder.get()
    if hook is None and not kwargs and serialization.all_atoms(args):
        # The most frequent call: a few ints, floats or strings. They hold no port and no
        # buffer, and plain pickle writes them as `encode` would.
        return Encoded((pickle.dumps((args, kwargs), 5), ()), [])
    handed, previous = start_handing()
    try:
        payload = encode((args, kwargs)) if hook is None else hook(endpoint, args, kwargs)
    except BaseException as exc:
        add_note(exc, f"monarch could not pickle the arguments of {endpoint._label()}.")
        raise
    finally:
        stop_handing(previous)
    return Encoded(payload, handed)


def check(mesh: ActorMesh[Any], method: str, cast: CastPlan | None = None) -> None:
    """Raise the `SupervisionError` a call to `method` gets when `mesh` (or a proc it targets)
    was stopped or failed, as far as this process knows (`cast`: its plan, if looked up)."""
    cast = plan(mesh) if cast is None else cast
    try:
        mesh._check_usable(method, cast.ranks)
    except SupervisionError:
        if record.SINK is not None:  # a send attempt, as Monarch records it
            _record_cast(mesh, cast.actor_key, cast.ranks, None)
        raise


def post_call(
    mesh: ActorMesh[Any],
    method: str,
    encoded: Encoded,
    reply: Any,
    targets: Sequence[int] | None = None,
    *,
    reply_for: Callable[[int], Any] | None = None,
    gathered: bool = False,
    checked: bool = False,
    cast: CastPlan | None = None,
) -> None:
    """Post one CALL of `method` with the `encoded` arguments (their plain payload) to each
    target rank of `mesh` (the view's ranks `targets`, default all).

    Every CALL replies to `reply` (a port address, or None for no reply), or, with `reply_for`,
    to `reply_for(global proc rank)`. A call to a stopped or failed mesh is refused: with a
    single `reply` port, as in Monarch, the port gets the error (the caller's future raises);
    otherwise the `SupervisionError` is raised here. The reply ports pickled in the arguments
    are recorded with the target procs before the calls are routed. `gathered`: `reply` is a
    `GatherPort` (a `call()`), which takes each host's replies as one batch when the CALLs go
    through the relays. `checked`: the caller has just made `check(mesh, method)`'s check
    itself. `cast`: the mesh's plan, when the caller looked it up already.
    """
    cast = plan(mesh) if cast is None else cast
    if not checked:
        try:
            check(mesh, method, cast)
        except SupervisionError as err:
            if reply is None or reply_for is not None:
                raise
            get_runtime().mailbox.fail_port(reply, err)
            return
    payload, handed = encoded
    ranks, procs, key = cast.ranks, cast.procs, cast.actor_key
    extent = cast.labels, cast.sizes
    local_ranks: Sequence[int] = range(len(ranks)) if targets is None else targets
    mailbox = get_runtime().mailbox
    # Reply ports in the arguments: if a target's proc dies before answering them, this
    # process answers them with the failure (registered before the calls are routed).
    table = cast.proc_mesh._table
    if handed:
        mailbox.ports_handed(handed, cast.procs_of(local_ranks), table.watcher or mailbox.address)
    hosts = relay.hosts_of(table)
    origin = None if record.SINK is None else _record_cast(mesh, key, ranks, targets)
    if hosts is None:
        posts: list[tuple[str, Envelope]]
        if reply_for is None:
            sender = None if reply is not None else current_instance().actor_key
            posts = [
                (procs[ranks[local]],
                 Call(CALL, key, method, payload, reply, (local, *extent), sender, origin))
                for local in local_ranks
            ]
        else:
            posts = [
                (procs[ranks[local]],
                 Call(CALL, key, method, payload, reply_for(ranks[local]), (local, *extent), None,
                      origin))
                for local in local_ranks
            ]
        mailbox.post_all(posts, payload)
    elif reply_for is None:
        sender = None if reply is not None else current_instance().actor_key
        # rank: per target
        template = Call(CALL, key, method, payload, reply, (0, *extent), sender, origin)
        relay.cast(table, hosts, ranks, targets, template, payload, reply if gathered else None)
    else:
        calls: list[tuple[int, Envelope]] = [
            (ranks[local],
             Call(CALL, key, method, payload, reply_for(ranks[local]), (local, *extent), None,
                  origin))
            for local in local_ranks
        ]
        relay.post(table, hosts, calls, payload)
    traffic.count_sent(key, mesh._spawned_local(local_ranks))


def post_one(mesh: ActorMesh[Any], method: str, encoded: Encoded, entry: PortEntry, rank: int,
             spawned: int, cast: CastPlan) -> Any:
    """`call_one`'s and `choose`'s post, when nothing calls for `post_call`'s general path: open
    the reply port with `entry` and post one CALL to the view's rank `rank` (`spawned`: its
    rank in the mesh as spawned). Returns the reply port, or None (nothing done) when the call
    needs the general path: a mesh or proc mesh that was stopped or has a failed rank (whose
    calls are refused, `check`) or is not known here, reply ports among the arguments, a
    payload that posts itself, telemetry, or a cast through the relays."""
    payload, handed = encoded
    if (handed or type(payload) is not tuple or record.SINK is not None
            or not mesh._plainly_usable() or relay.hosts_of(cast.proc_mesh._table) is not None):
        return None
    proc = cast.procs[cast.ranks[rank]]
    mailbox = get_runtime().mailbox
    reply = mailbox.open_port(entry, (proc,))
    env = Call(CALL, cast.actor_key, method, payload, reply, (rank, cast.labels, cast.sizes),
               None, None)
    mailbox.post_waiting(proc, env)
    traffic.sent[(cast.actor_key, spawned)] += 1
    return reply


def _record_cast(mesh: ActorMesh[Any], key: str, ranks: Sequence[int],
                 targets: Sequence[int] | None) -> int:
    """The telemetry of one cast (`observe.cast_sent`): the view cast to is the mesh's, or the
    single rank a `choose` picked (a point: no dimensions)."""
    view = mesh._shape
    if targets is not None and len(targets) == 1 and len(ranks) > 1:
        view = Shape([], Slice(offset=ranks[targets[0]], sizes=[], strides=[]))
    return observe.cast_sent(current_instance(), key, view)


def cancel_call(mesh: ActorMesh[Any], reply: Any, targets: Sequence[int] | None = None) -> None:
    """Withdraw the CALLs to the view's ranks `targets` (default all) of `mesh` that reply to
    the port `reply`: each target proc gets a `cancel` control (after the CALL: one writer per
    peer keeps the order), which drops the call if it is queued and interrupts it if it runs
    (`HostedActor.cancel`); the port fails with `CancelledError` where a reply is still due,
    and later replies are dropped."""
    cast = plan(mesh)
    mailbox = get_runtime().mailbox
    cancel = control(Cancel(cast.actor_key, reply))
    table = cast.proc_mesh._table
    hosts = relay.hosts_of(table)
    ranks = cast.ranks if targets is None else [cast.ranks[r] for r in targets]
    if hosts is None:
        for proc in {cast.procs[g] for g in ranks}:
            mailbox.post(proc, cancel)
    else:  # behind the CALLs, on their path
        relay.post(table, hosts, [(g, cancel) for g in set(ranks)], (b"", []))
    mailbox.fail_port(reply, concurrent.futures.CancelledError("the call was cancelled"))


def post_control(mesh: ActorMesh[Any], control: Control) -> None:
    """Post `control` to the proc of every rank of `mesh`, behind the CALLs posted to them
    before (through the relays when casts to `mesh` go through the tree)."""
    cast = plan(mesh)
    table = cast.proc_mesh._table
    hosts = relay.hosts_of(table)
    if hosts is None:
        mailbox = get_runtime().mailbox
        for rank in range(len(cast.ranks)):
            mailbox.post(cast.proc_of(rank), control)
    else:
        relay.post(table, hosts, [(g, control) for g in cast.ranks], (b"", []))
