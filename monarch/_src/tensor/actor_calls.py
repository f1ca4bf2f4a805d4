"""Actors and distributed tensors: the endpoint `rref` adverb.

`mesh.endpoint.rref(*args)` sends the call straight to the actors, like any other call from
this controller (so FIFO with the controller's other calls to them holds), with each proc's
tensor-engine worker as the reply address. The worker keeps the actor's result under the id the
controller allocated, when it reaches the matching `CallActor` command. Distributed tensors in
the arguments reach each actor as its proc's shard (see `Tensor.__reduce_ex__`).
"""

from __future__ import annotations

from typing import Any

import torch.utils._pytree as pytree

from monarch._src.mesh.actor import EndpointProperty
from monarch._src.runtime.envelope import CALL
from monarch._src.runtime.runtime import get_runtime
from monarch._src.tensor.commands import CallActor, OpMeta
from monarch._src.tensor.dispatch import fake_inputs, faking, output_handles, tensor_meta
from monarch._src.tensor.mesh import active_mesh_or_none
from monarch._src.tensor.stream import get_active_stream

__all__ = ["endpoint_rref"]


def endpoint_rref(ep: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Implementation of `Endpoint.rref` (see the module docstring)."""
    mesh = active_mesh_or_none()
    label = ep._label()
    if mesh is None:
        raise ValueError(
            f"{label}.rref needs an active mesh: call it inside proc_mesh.activate()."
        )
    prop = getattr(ep._mesh._class, ep._name, None)
    propagate = prop._propagator if isinstance(prop, EndpointProperty) else None
    if not callable(propagate):
        raise ValueError(  # noqa: TRY004 - a missing declaration, not a wrong argument type
            f"{label}.rref needs the result's shape: declare the endpoint with "
            "@endpoint(propagate=fn), where fn maps fake arguments to a fake result."
        )
    flat, spec = pytree.tree_flatten((args, kwargs))
    fakes, _, inputs, found, tensors = fake_inputs(flat, mesh)
    assert found is not None  # the active mesh, or the tensors' own
    fargs, fkwargs = pytree.tree_unflatten(fakes, spec)
    with faking():
        fake_result = propagate(*fargs, **fkwargs)
    mesh = found
    engine = mesh._engine
    actors = ep._mesh
    global_ranks, labels, sizes = actors._cast_plan()
    ports = engine.rref_ports()
    engine.flush()  # the arguments' values must exist before the actors look them up
    payload = ep._encode_args(args, kwargs)
    out_flat, out_spec = pytree.tree_flatten(fake_result)
    stream = get_active_stream()
    results, outputs, out_meta = output_handles(out_flat, mesh, stream)
    worker_ranks = tuple(engine.rank_of[g] for g in global_ranks)
    meta = OpMeta(label, tuple(tensor_meta(t._fake) for t in tensors), tuple(out_meta))
    engine.submit(lambda seq: CallActor(seq, worker_ranks, stream.name, actors._name, ep._name,
                                        None, None, tuple(inputs), tuple(outputs), meta))
    actors._check_usable(ep._name)
    procs = actors._proc_keys()
    key = actors._key
    get_runtime().mailbox.post_all(
        [
            (procs[g], (CALL, key, ep._name, payload, ports[engine.rank_of[g]],
                        (local, labels, sizes), None))
            for local, g in enumerate(global_ranks)
        ],
        payload,
    )
    return pytree.tree_unflatten(results, out_spec)
