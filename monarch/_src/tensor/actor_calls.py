"""Actors and distributed tensors: endpoint calls with distributed tensors among their
arguments, and the endpoint `rref` adverb.

An endpoint call (any adverb) whose arguments hold distributed tensors is sent straight to the
actors, like any other call from this controller (so FIFO with its other calls to them holds),
but its reply address is each proc's tensor-engine worker. An `ActorCall` command at the call's
place in the stream makes each worker hand its values over to its actor (`worker.shard_value`
is what the pickled tensors unpickle through), wait for the actor's reply and forward it to the
caller. So each actor receives its own proc's shard as a plain `torch.Tensor`, sees every
operation issued before the call, and operations issued after it see what the endpoint did.

`mesh.endpoint.rref(*args)` works the same way with a `CallActor` command; the worker keeps the
actor's result under the id the controller allocated instead of forwarding it. Its result lives
on the active mesh, or outside `activate()` on the mesh of the distributed tensors among its
arguments (as on torchmonarch).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch.utils._pytree as pytree

from monarch._src.lowlevel import casting, encode, hooks
from monarch._src.mesh.proc_mesh import proc_table
from monarch._src.tensor.commands import ActorCall, CallActor, OpMeta
from monarch._src.tensor.dispatch import fake_inputs, faking, output_handles, tensor_meta
from monarch._src.tensor.mesh import active_mesh_or_none
from monarch._src.tensor.stream import get_active_stream
from monarch._src.tensor.tensor import Tensor, _capturing

__all__ = ["TensorArgs", "encode_endpoint_args", "endpoint_rref"]

# Call tokens: the key of one call's tensors in each proc's hand-over table.
_tokens = itertools.count(1)


class _Sends:
    """Collects the distributed tensors pickled into one endpoint call's arguments."""

    __slots__ = ("engine", "tensors", "token")

    def __init__(self) -> None:
        self.engine: Any = None
        self.tensors: list[Tensor] = []
        self.token = 0

    def add(self, t: Tensor) -> Any:
        """Record `t`; what it pickles as (each actor unpickles its proc's value)."""
        from monarch._src.tensor.worker import shard_value

        engine = t._mesh._engine
        if self.engine is None:
            self.engine = engine
            self.token = next(_tokens)
        elif engine is not self.engine:
            raise ValueError(
                f"The distributed tensors in one endpoint call must live on one proc mesh, but "
                f"they live on {self.tensors[0]._mesh!r} and {t._mesh!r}; move them with "
                "to_mesh() first."
            )
        if t._state != "ok":
            raise ValueError(
                "A distributed tensor passed to an actor is a dropped borrow or is mutably "
                "borrowed by another stream; drop the borrow before sending it."
            )
        self.tensors.append(t)
        return (shard_value, (engine.id, self.token, len(self.tensors) - 1))


class TensorArgs:
    """Encoded endpoint arguments holding distributed tensors; `Endpoint._post` hands the
    posting to `post`."""

    __slots__ = ("payload", "sends")

    def __init__(self, payload: Any, sends: _Sends) -> None:
        self.payload = payload  # the plain encoded (args, kwargs)
        self.sends = sends

    def post(self, ep: Any, reply: Any, ranks: list[int] | None, handed: list[Any]) -> None:
        """Issue the call's `ActorCall` and post it to the targeted actors, each replying to
        its proc's worker (which forwards the reply to `reply`); `handed`: the reply ports
        pickled in the arguments (`casting.Encoded`)."""
        call = casting.target(ep)
        actors = call.mesh
        plan = casting.plan(actors)
        casting.check(actors, call.method, plan)
        engine = self.sends.engine
        global_ranks = plan.ranks
        targets = range(len(global_ranks)) if ranks is None else ranks
        cast = {engine.rank_of[global_ranks[local]]: local for local in targets}
        label = call.label
        for t in self.sends.tensors:
            held = t._mesh.engine_ranks
            if held is not None and not set(cast) <= set(held):
                missing = sorted(set(cast) - set(held))
                raise ValueError(
                    f"A distributed tensor passed to {label} lives on {t._mesh!r}, but "
                    f"the call also reaches actors on procs (engine ranks {missing}) where it "
                    "has no value; call a slice of the actor mesh that matches the tensor's "
                    "mesh, or move the tensor with to_mesh() first."
                )
        ports = engine.rref_ports()
        token = self.sends.token
        shards = tuple(t._id for t in self.sends.tensors)
        stream = self.sends.tensors[0]._stream
        meta = OpMeta(label, tuple(tensor_meta(t._fake) for t in self.sends.tensors), ())
        ranks_ = tuple(sorted(cast))
        engine.submit(lambda seq: ActorCall(seq, ranks_, stream.name, label, token, shards,
                                            reply, cast, (), meta), depth=4)
        engine.flush()
        casting.post_call(actors, call.method, casting.Encoded(self.payload, handed), None,
                          list(cast.values()), reply_for=lambda g: ports[engine.rank_of[g]][1],
                          checked=True, cast=plan)


def encode_endpoint_args(ep: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Encode an endpoint call's arguments (installed as `endpoint.encode_hook`): the plain
    payload, or a `TensorArgs` when distributed tensors are among them."""
    prev = getattr(_capturing, "sends", None)
    sends = _capturing.sends = _Sends()
    try:
        payload = encode((args, kwargs))
    finally:
        _capturing.sends = prev
    if not sends.tensors:
        return payload
    engine = sends.engine
    call = casting.target(ep)
    procs = casting.plan(call.mesh).proc_mesh
    if proc_table(procs) is not proc_table(engine.proc_mesh):
        raise ValueError(
            "monarch Tensors sent to an actor must be located on the same process as the "
            f"actor. However {sends.tensors[0]._mesh!r} is not the mesh of {procs!r}, where "
            f"{call.label} runs; spawn the actors on the tensors' proc mesh or move the "
            "tensors with to_mesh() first."
        )
    return TensorArgs(payload, sends)


hooks.call_encoder.install(encode_endpoint_args)


def endpoint_rref(ep: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Implementation of `Endpoint.rref` (see the module docstring)."""
    call = casting.target(ep)
    label = call.label
    propagate = call.propagate  # as_endpoint(propagate=...), else the @endpoint's
    # "inspect": the endpoint's result is not a tensor on the mesh (as on Monarch, the call
    # runs for its effect and rref gives None).
    if not callable(propagate) and propagate != "inspect":
        raise ValueError(  # a missing declaration, not a wrong argument type
            f"{label}.rref needs the result's shape: declare the endpoint with "
            "@endpoint(propagate=fn), where fn maps fake arguments to a fake result, or "
            "propagate='inspect' for an endpoint whose result is not a tensor (rref gives None)."
        )
    flat, spec = pytree.tree_flatten((args, kwargs))
    # Outside activate() the result lives where the distributed tensors among the arguments
    # live (as on torchmonarch: getting_started.py calls rref so); with neither, nowhere.
    fakes, _, inputs, found, tensors = fake_inputs(flat, active_mesh_or_none())
    if found is None:
        raise ValueError(
            f"{label}.rref has no mesh to put its result on: no mesh is active and no "
            "distributed tensor is among its arguments; call it inside "
            "`with mesh.activate():`, or pass it a distributed tensor."
        )
    fargs, fkwargs = pytree.tree_unflatten(fakes, spec)
    fake_result = None
    if callable(propagate):
        with faking():
            fake_result = propagate(*fargs, **fkwargs)
    mesh = found
    engine = mesh._engine
    actors = call.mesh
    cast = casting.plan(actors)
    global_ranks = cast.ranks
    ports = engine.rref_ports()
    encoded = casting.encode_args(ep, args, kwargs)
    token = 0
    shards: tuple[int, ...] = ()
    tensor_args = encoded.payload
    if isinstance(tensor_args, TensorArgs):
        if tensor_args.sends.engine is not engine:
            raise ValueError(
                f"{label}.rref: the distributed tensors among the arguments live on another proc "
                f"mesh than {mesh!r}; move them with to_mesh() first."
            )
        token = tensor_args.sends.token
        encoded = casting.Encoded(tensor_args.payload, encoded.handed)
        shards = tuple(t._id for t in tensor_args.sends.tensors)
    out_flat, out_spec = pytree.tree_flatten(fake_result)
    stream = get_active_stream()
    results, outputs, out_meta = output_handles(out_flat, mesh, stream)
    worker_ranks = tuple(engine.rank_of[g] for g in global_ranks)
    meta = OpMeta(label, tuple(tensor_meta(t._fake) for t in tensors), tuple(out_meta))
    engine.submit(lambda seq: CallActor(seq, worker_ranks, stream.name, cast.mesh_name,
                                        call.method, None, None, tuple(inputs), tuple(outputs),
                                        meta, token, shards))
    engine.flush()
    casting.post_call(actors, call.method, encoded, None,
                      reply_for=lambda g: ports[engine.rank_of[g]][0], cast=cast)
    return pytree.tree_unflatten(results, out_spec)
