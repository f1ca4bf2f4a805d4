"""Remote functions: `remote(fn, propagate=...)`, `call_on_shard_and_fetch`, mesh coordinates.

Calling a `Remote` under `activate()` (its `rref`) runs the function on every proc of the mesh
and returns distributed tensors; the controller learns their shapes from the propagator:

* a callable: called with fake tensors in place of distributed ones;
* None or "mocked": the function itself run on fake tensors at the controller (it must be
  importable there and use only torch operations that fake tensors support);
* "inspect": the function run at the controller on the real values of rank 0 (fetched; blocks);
* "cached": the function run once on rank 0 of the mesh, its output shapes cached per input
  signature (blocks on the first call only).

The actor adverbs (`call`, `call_one`, `choose`, `stream`, `broadcast`) run it and return its
Python results, like an actor endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from monarch._src.lowlevel import Future
from monarch._src.tensor.commands import CallRemote, OpMeta
from monarch._src.tensor.dispatch import fake_inputs, faking, output_handles, tensor_meta
from monarch._src.tensor.fetch import engine_rank_at, split_tree
from monarch._src.tensor.mesh import DeviceMesh, active_mesh_or_none
from monarch._src.tensor.stream import get_active_stream
from monarch._src.tensor.tensor import Tensor
from monarch._src.tensor.worker import resolve_function

__all__ = [
    "Remote",
    "RemoteProcessGroup",
    "call_on_shard_and_fetch",
    "mesh_coordinate",
    "remote",
]

_PROPAGATE_MODES = (None, "cached", "inspect", "mocked")


class PickledFunction:
    """A function sent by value, pickled once when the `Remote` is made (so a distributed
    tensor captured in its closure is refused there, not in the middle of a batch)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> PickledFunction:
        import cloudpickle  # type: ignore[import-untyped]  # ships no type information

        from monarch._src.tensor import tensor as tensor_module

        tensor_module._capturing.active = True
        try:
            return cls(cloudpickle.dumps(fn))
        finally:
            tensor_module._capturing.active = False

    def __reduce__(self) -> Any:
        return (PickledFunction, (self.data,))


class Remote:
    """A function to run on every proc of the active mesh; see the module docstring."""

    # `send(...)` (mesh/endpoint.py) takes it as it takes an endpoint: through `_send`.
    _monarch_sendable = True

    def __init__(self, fn: Callable[..., Any] | str, propagate: Any = None) -> None:
        if not (callable(fn) or isinstance(fn, str)):
            raise TypeError(f"remote takes a function or a 'module.function' path, not {fn!r}.")
        if not (callable(propagate) or propagate in _PROPAGATE_MODES):
            raise ValueError(
                f"remote propagate must be a callable or one of {_PROPAGATE_MODES}, not "
                f"{propagate!r}."
            )
        self._fn = fn
        self._propagate = propagate
        self._cache: dict[Any, Any] = {}  # input signature -> fake result ("cached")
        # Dotted paths travel as strings; functions of importable modules as their path too.
        mod = getattr(fn, "__module__", None)
        qual = getattr(fn, "__qualname__", "")
        self._wire: Any
        if isinstance(fn, str):
            self._wire = fn
        elif mod and mod != "__main__" and qual and "<" not in qual and "." not in qual:
            self._wire = f"{mod}.{qual}"
        else:
            self._wire = PickledFunction.of(fn)

    def _monarch_remote_target(self) -> Callable[..., Any] | str:
        """What a worker runs when it finds this wrapper at a function's dotted path (the
        module-level `@remote` pattern): the wrapped function, or the path it names."""
        return self._fn

    @property
    def _name(self) -> str:
        return self._fn if isinstance(self._fn, str) else getattr(self._fn, "__qualname__", "fn")

    def __repr__(self) -> str:
        return f"<remote {self._name}>"

    # ---- distributed results ------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.rref(*args, **kwargs)

    def rref(self, *args: Any, **kwargs: Any) -> Any:
        """Run on every proc of the mesh; returns distributed tensors shaped by `propagate`."""
        flat, spec = pytree.tree_flatten((args, kwargs))
        fakes, cmd_flat, inputs, mesh, tensors = fake_inputs(flat, active_mesh_or_none())
        if mesh is None:
            raise ValueError(
                f"Calling remote function {self._name} needs an active mesh; use it inside "
                "`with proc_mesh.activate():`."
            )
        fargs, fkwargs = pytree.tree_unflatten(fakes, spec)
        fake_result = self._propagated(mesh, args, kwargs, fargs, fkwargs, tensors)
        out_flat, out_spec = pytree.tree_flatten(fake_result)
        stream = get_active_stream()
        results, outputs, out_meta = output_handles(out_flat, mesh, stream)
        cargs, ckwargs = pytree.tree_unflatten(cmd_flat, spec)
        meta = OpMeta(self._name, tuple(tensor_meta(t._fake) for t in tensors), tuple(out_meta))
        ranks = mesh.engine_ranks
        wire = self._wire
        mesh._engine.submit(lambda seq: CallRemote(seq, ranks, stream.name, wire, cargs, ckwargs,
                                                   tuple(inputs), tuple(outputs), meta))
        return pytree.tree_unflatten(results, out_spec)

    def _propagated(self, mesh: DeviceMesh, args: Any, kwargs: Any, fargs: Any, fkwargs: Any,
                    tensors: list[Tensor]) -> Any:
        p = self._propagate
        if callable(p):
            with faking():
                return p(*fargs, **fkwargs)
        if p is None or p == "mocked":
            fn = resolve_function(self._fn)
            with faking():
                return fn(*fargs, **fkwargs)
        if p == "inspect":
            from torch.utils._python_dispatch import _disable_current_modes

            from monarch._src.tensor.fetch import inspect
            from monarch._src.tensor.mesh import no_mesh

            real_args, real_kwargs = inspect((args, kwargs))
            with _disable_current_modes(), no_mesh.activate():
                result = resolve_function(self._fn)(*real_args, **real_kwargs)
            return _fakes_like(result)
        # "cached"
        key = tuple((tuple(t.shape), t.dtype, t.device) for t in tensors)
        if key not in self._cache:
            tree, _ = split_tree((args, kwargs))
            rank = engine_rank_at(mesh, None, {})
            from monarch._src.tensor.fetch import wait

            result = wait(mesh._engine.call_worker(
                rank, "run_function", (self._wire, tree[0], tree[1]), lambda v: v
            ), mesh._engine.timeout)
            self._cache[key] = _fakes_like(result)
        return self._cache[key]

    # ---- actor adverbs --------------------------------------------------------------------
    def _workers(self, args: Any, kwargs: Any,
                 method: str = "run_function") -> tuple[DeviceMesh, Any, Any]:
        tree, mesh = split_tree((args, kwargs))
        active = active_mesh_or_none()
        if active is None:
            raise ValueError(
                "Calling a 'remote' monarch function requires an active proc_mesh (`with "
                "proc_mesh.activate():`)"
            )
        if mesh is not None and not mesh._same(active):
            raise ValueError(f"Arguments live on {mesh!r}, not on the active {active!r}.")
        engine = active._engine
        engine.flush()
        workers = engine.workers._new_with_shape(active._shape)
        return active, getattr(workers, method), tree

    def _unwrap(self, engine: Any) -> Callable[[Any], Any]:
        import sys

        from monarch._src.tensor.engine import _stack

        here = _stack(sys._getframe(1))

        def unwrap(reply: Any) -> Any:
            ok, value = reply
            if not ok:
                raise engine.remote_exception(value, here)
            return value
        return unwrap

    def call(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run on every proc of the active mesh; a ValueMesh of the results."""
        mesh, ep, tree = self._workers(args, kwargs)
        unwrap = self._unwrap(mesh._engine)
        fut: Future[Any] = ep.call(self._wire, tree[0], tree[1])
        return fut.map(lambda vm: _map_value_mesh(vm, unwrap))

    def call_one(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run on the single proc of the active mesh; its result."""
        mesh, ep, tree = self._workers(args, kwargs)
        if len(mesh) != 1:
            raise ValueError(f"call_one requires exactly 1 actor, but mesh has {len(mesh)}")
        fut: Future[Any] = ep.call_one(self._wire, tree[0], tree[1])
        return fut.map(self._unwrap(mesh._engine))

    def choose(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run on one proc of the active mesh, picked at random; its result."""
        mesh, ep, tree = self._workers(args, kwargs)
        fut: Future[Any] = ep.choose(self._wire, tree[0], tree[1])
        return fut.map(self._unwrap(mesh._engine))

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Future[Any]]:
        """Run on every proc; one future per result in arrival order."""
        mesh, ep, tree = self._workers(args, kwargs)
        unwrap = self._unwrap(mesh._engine)
        return iter([f.map(unwrap) for f in ep.stream(self._wire, tree[0], tree[1])])

    def broadcast(self, *args: Any, **kwargs: Any) -> None:
        """Run on every proc without waiting for results."""
        _, ep, tree = self._workers(args, kwargs)
        ep.broadcast(self._wire, tree[0], tree[1])

    def _send(self, args: tuple[Any, ...], kwargs: dict[str, Any], port: Any,
              selection: str) -> None:
        """`send(remote_fn, args, kwargs, port)`, as getting_started.py does on torchmonarch:
        each proc's result goes to `port`, unwrapped."""
        _, ep, tree = self._workers(args, kwargs, "send_function")
        ep._send((self._wire, tree[0], tree[1]), {}, port, selection)


def _map_value_mesh(vm: Any, fn: Callable[[Any], Any]) -> Any:
    from monarch._src.mesh.value_mesh import ValueMesh

    return ValueMesh(vm._shape, [fn(v) for v in vm.values()])


def _fakes_like(result: Any) -> Any:
    def fake(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            with faking():
                return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
        return x
    return pytree.tree_map(fake, result)


def remote(fn: Callable[..., Any] | str | None = None, *, propagate: Any = None) -> Any:
    """A `Remote` for `fn` (a function or a "module.function" path); usable as a decorator,
    with or without arguments."""
    if fn is None:
        return lambda f: Remote(f, propagate)
    return Remote(fn, propagate)


def call_on_shard_and_fetch(remote_fn: Any, *args: Any, shard: dict[str, int] | None = None,
                            **kwargs: Any) -> Future[Any]:
    """Run `remote_fn` on one shard (default: all coordinates 0) and fetch its result."""
    fn = remote_fn._wire if isinstance(remote_fn, Remote) else remote_fn
    tree, mesh = split_tree((args, kwargs))
    if mesh is None:
        mesh = active_mesh_or_none()
    if mesh is None:
        raise ValueError(
            "call_on_shard_and_fetch needs distributed tensors among its arguments or an active "
            "mesh."
        )
    rank = engine_rank_at(mesh, shard, {})
    return mesh._engine.call_worker(rank, "run_function", (fn, tree[0], tree[1]), lambda v: v)


def _coordinate(ranks: tuple[int, ...], sizes: tuple[int, ...], which: tuple[int, ...]) -> Any:
    """Worker side of `mesh_coordinate`: this proc's row-major index over dims `which`."""
    from monarch._src.tensor.worker import current_state

    pos = ranks.index(current_state().rank)
    coords = []
    for size in reversed(sizes):
        coords.append(pos % size)
        pos //= size
    coords.reverse()
    value = 0
    for i in which:
        value = value * sizes[i] + coords[i]
    return torch.tensor(value, dtype=torch.int64)


_coordinate_remote = Remote(
    _coordinate, propagate=lambda *a: torch.empty((), dtype=torch.int64)
)


def mesh_coordinate(mesh: DeviceMesh, dims: tuple[str, ...]) -> Tensor:
    """A distributed int64 scalar: each proc's coordinate along `dims` of `mesh`."""
    labels = list(mesh._shape.labels)
    for d in dims:
        if d not in labels:
            raise ValueError(f"Unknown dimension {d!r} for {mesh!r}; it has {labels}.")
    ranks = tuple(mesh._engine.rank_of[g] for g in mesh._shape.ranks())
    sizes = tuple(mesh._shape.ndslice.sizes)
    which = tuple(labels.index(d) for d in dims)
    with mesh.activate():
        return _coordinate_remote(ranks, sizes, which)  # type: ignore[no-any-return]


class RemoteProcessGroup:
    """A process group over some dimensions of a mesh, as an argument to remote functions.

    On the worker it arrives as the `torch.distributed` process group of that proc's slice.
    """

    mesh: DeviceMesh  # the mesh whose dimensions it spans
    dims: tuple[str, ...]  # the dimensions it reduces over
    groups: tuple[tuple[int, ...], ...]  # engine ranks of each slice's group

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Get a RemoteProcessGroup from device_mesh.process_group(dims).")

    @classmethod
    def _create(cls, mesh: DeviceMesh, dims: tuple[str, ...]) -> RemoteProcessGroup:
        from monarch._src.tensor.collectives import groups_along

        pg = object.__new__(cls)
        pg.mesh = mesh
        pg.dims = dims
        pg.groups = groups_along(mesh, dims)
        return pg

    def __reduce__(self) -> Any:
        return (_worker_group, (self.groups,))

    def __repr__(self) -> str:
        return f"<RemoteProcessGroup {self.dims} of {self.mesh!r}>"


def _worker_group(groups: tuple[tuple[int, ...], ...]) -> Any:
    from monarch._src.tensor.worker import current_state

    state = current_state()
    members = next(g for g in groups if state.rank in g)
    return state.groups.get(members, torch.device("cpu"))
