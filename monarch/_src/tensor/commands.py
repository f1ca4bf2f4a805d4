"""The controller -> worker protocol: an ordered stream of plain, picklable commands.

Every command names the values it reads and writes by integer id, the engine ranks that run it
(`None`: all), and the stream it runs on. Commands that compute carry `OpMeta` (op name, input
and output fake shapes and dtypes) so another backend (a simulator) can cost them without torch
running anything. Workers receive the same stream in the same order; a rank outside `ranks`
skips the command.

Design note: commands are `NamedTuple`s, not classes with behaviour, so any backend can consume
them and they pickle compactly; the rejected alternative (sending closures) hides dependencies
from anything but a real worker.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "ActorCall",
    "Borrow",
    "CallActor",
    "CallOp",
    "CallRemote",
    "Command",
    "Delete",
    "OpMeta",
    "Reduce",
    "Ref",
    "SendTensor",
    "TensorMeta",
]


class Ref(NamedTuple):
    """A value held by the workers, by id, inside a command's arguments."""

    id: int


class TensorMeta(NamedTuple):
    """Fake-tensor metadata of one tensor: enough to cost an op without running it."""

    shape: tuple[int, ...]
    dtype: str
    device: str


class OpMeta(NamedTuple):
    """What a command computes, for cost models: op name, inputs and outputs."""

    name: str
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]


class CallOp(NamedTuple):
    """Run one torch operator (`op` is its qualified name, e.g. "aten::add.Tensor")."""

    seq: int
    ranks: tuple[int, ...] | None
    stream: str
    op: str
    args: Any  # pytree with Ref in place of distributed tensors
    kwargs: Any
    inputs: tuple[int, ...]  # ids read
    outputs: tuple[int | None, ...]  # id per flattened tensor output (None: not kept)
    meta: OpMeta


class CallRemote(NamedTuple):
    """Run a Python function (by dotted path or pickled) on each rank; keep its tensor outputs."""

    seq: int
    ranks: tuple[int, ...] | None
    stream: str
    fn: Any  # "module.function" or a picklable callable
    args: Any
    kwargs: Any
    inputs: tuple[int, ...]
    outputs: tuple[int | None, ...]
    meta: OpMeta


class CallActor(NamedTuple):
    """Call an actor endpoint on each rank's own actor; keep the result as a tensor (rref)."""

    seq: int
    ranks: tuple[int, ...] | None
    stream: str
    mesh: Any  # the ActorMesh, over the same procs
    method: str
    args: Any
    kwargs: Any
    inputs: tuple[int, ...]
    outputs: tuple[int | None, ...]
    meta: OpMeta
    token: int = 0  # the call's key in the proc's hand-over table (0: no tensor arguments)
    shards: tuple[int, ...] = ()  # ids of the distributed tensors pickled into the arguments


class ActorCall(NamedTuple):
    """An endpoint call (call, call_one, choose, stream, broadcast) whose arguments hold
    distributed tensors: hand this rank's values of `shards` to its actor under `token`, wait
    for the actor's reply (the stream waits while the endpoint runs) and forward it to `reply`
    as the reply of cast rank `cast_ranks[rank]`."""

    seq: int
    ranks: tuple[int, ...] | None
    stream: str
    method: str  # "actor_mesh.endpoint", for messages
    token: int
    shards: tuple[int, ...]
    reply: Any  # the caller's port address, or None (broadcast)
    cast_ranks: dict[int, int]  # engine rank -> the actor's rank in the call
    outputs: tuple[int | None, ...]  # always (): nothing is kept on the workers
    meta: OpMeta


class Reduce(NamedTuple):
    """A collective over groups of ranks (one group per slice along the reduced dims)."""

    seq: int
    ranks: tuple[int, ...] | None
    stream: str
    src: int
    out: int
    groups: tuple[tuple[int, ...], ...]  # engine ranks of every group, in group-rank order
    reduction: str  # stack, sum, avg, product, min, max, band, bor, bxor
    scatter: bool
    inplace: bool
    meta: OpMeta


class SendTensor(NamedTuple):
    """Move a value between ranks: pairs (from_rank, to_rank); receivers keep it under `out`."""

    seq: int
    ranks: tuple[int, ...] | None
    stream: str
    src: int
    out: int
    pairs: tuple[tuple[int, int], ...]
    meta: OpMeta


class Borrow(NamedTuple):
    """Make `out` name the same value as `src` on another stream (`drop`: forget `out`)."""

    seq: int
    ranks: tuple[int, ...] | None
    stream: str
    src: int
    out: int
    mutable: bool
    drop: bool


class Delete(NamedTuple):
    """Forget values the controller no longer references."""

    ids: tuple[int, ...]


Command = CallOp | CallRemote | CallActor | ActorCall | Reduce | SendTensor | Borrow | Delete
