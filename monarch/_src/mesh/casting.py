"""The casting seam: how a call to an actor mesh becomes one CALL envelope per target rank.

`Endpoint`'s adverbs use it, and so do features that send endpoint calls of their own (the
tensor engine sends calls whose replies go to its workers, and `rref` calls). They use only
what is here, never the mesh's or the endpoint's private state:

* `plan(mesh)`: a `CastPlan`, what a cast needs to know about an actor mesh (the targets'
  global proc ranks and routing keys, the actors' key, the cast extent, the class and the proc
  mesh). Built once per mesh object and cached.
* `target(endpoint)`: an `EndpointTarget`, the mesh, the method name, the label used in error
  messages and the endpoint's `propagate` function.
* `encode_args(endpoint, args, kwargs)`: check the arguments against the endpoint's signature
  and pickle them once (what every adverb does first; a feature's encoder, installed in the
  `call_encoder` slot, may return a payload that posts itself).
* `check(mesh, method)`: raise the `SupervisionError` a call to a stopped or failed mesh gets.
* `post_call(mesh, method, payload, reply, targets, reply_for=...)`: refuse or post the CALLs.
* `cancel_call(mesh, reply, targets)`: withdraw the CALLs that reply to `reply` (`Future.cancel`).
* `post_control(mesh, control)`: post a control to the proc of every rank of `mesh`, on the
  path its CALLs take (`stop_actor`, `upgrade_actor`: they must not overtake them).

When the proc mesh spans several hosts (config `cast_tree`), the CALLs and cancels go through one
relay proc per host (`relay.py`), and `CastPlan.procs_of` names the relays too: a reply port waits
on them as on the target procs.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from monarch._src.mesh import observe, relay, traffic
from monarch._src.mesh.context import current_instance
from monarch._src.mesh.control_ops import Cancel
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import CALL, Call, Control, Envelope
from monarch._src.runtime.runtime import get_runtime
from monarch._src.shape import Shape, Slice
from monarch._src.supervision.errors import SupervisionError
from monarch._src.telemetry import record

if TYPE_CHECKING:
    from monarch._src.mesh.actor_mesh import ActorMesh
    from monarch._src.mesh.endpoint import Endpoint
    from monarch._src.mesh.proc_mesh import ProcMesh

__all__ = [
    "CastPlan",
    "EndpointTarget",
    "cancel_call",
    "check",
    "encode_args",
    "plan",
    "post_call",
    "post_control",
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
        return tuple({self.procs[g] for g in targets})


class EndpointTarget(NamedTuple):
    """An endpoint, as a feature that sends its calls itself sees it."""

    mesh: ActorMesh[Any]
    method: str  # the endpoint's name on the actor class
    label: str  # "<mesh name>.<method>", as error messages name it
    propagate: Any  # `propagate=` of as_endpoint, else of the @endpoint; None if none


def plan(mesh: ActorMesh[Any]) -> CastPlan:
    """The cast plan of `mesh` (cached on the mesh object)."""
    return mesh._cast_plan()


def target(endpoint: Endpoint[..., Any]) -> EndpointTarget:
    """The mesh, method, label and `propagate` of `endpoint`."""
    return EndpointTarget(endpoint._mesh, endpoint._name, endpoint._label(),
                          endpoint._propagate())


def encode_args(endpoint: Endpoint[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """Check `args`/`kwargs` against the endpoint's signature (inspect's `TypeError`) and encode
    them once: a plain payload, or what the installed `call_encoder` made of them."""
    return endpoint._encode_args(args, kwargs)


def check(mesh: ActorMesh[Any], method: str) -> None:
    """Raise the `SupervisionError` a call to `method` gets when `mesh` (or a proc it targets)
    was stopped or failed, as far as this process knows."""
    try:
        mesh._check_usable(method)
    except SupervisionError:
        if record.SINK is not None:  # a send attempt, as Monarch records it
            cast = plan(mesh)
            _record_cast(mesh, cast.actor_key, cast.ranks, None)
        raise


def post_call(
    mesh: ActorMesh[Any],
    method: str,
    payload: Any,
    reply: Any,
    targets: Sequence[int] | None = None,
    *,
    reply_for: Callable[[int], Any] | None = None,
    handed: Any = None,
    gathered: bool = False,
    checked: bool = False,
) -> None:
    """Post one CALL of `method` with the encoded `payload` to each target rank of `mesh` (the
    view's ranks `targets`, default all).

    Every CALL replies to `reply` (a port address, or None for no reply), or, with `reply_for`,
    to `reply_for(global proc rank)`. A call to a stopped or failed mesh is refused: with a
    single `reply` port, as in Monarch, the port gets the error (the caller's future raises);
    otherwise the `SupervisionError` is raised here. `handed`: the reply ports pickled in the
    payload, recorded with the target procs before the calls are routed. `gathered`: `reply` is
    a `GatherPort` (a `call()`), which takes each host's replies as one batch when the CALLs go
    through the relays. `checked`: the caller has just made `check(mesh, method)`'s check
    itself.
    """
    if not checked:
        try:
            check(mesh, method)
        except SupervisionError as err:
            if reply is None or reply_for is not None:
                raise
            get_runtime().mailbox.fail_port(reply, err)
            return
    cast = plan(mesh)
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
