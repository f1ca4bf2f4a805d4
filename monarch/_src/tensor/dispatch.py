"""Turning torch operations into commands: the dispatch mode and the per-op path.

Under `activate()` a `TorchDispatchMode` sees every aten op; ops on distributed tensors outside
it reach `Tensor.__torch_dispatch__`. Both land in `dispatch`: check mesh and stream, compute the
outputs' metadata by running the op on fake tensors, create handles for the outputs, and append
a `CallOp` to the engine's stream. Nothing waits for a worker.

Ops that produce Python values from data (`item()`, `tolist()`, printing) cannot run without the
values; they raise a `ValueError` pointing at `inspect`/`fetch_shard`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from monarch._src.tensor.commands import CallOp, OpMeta, Ref, TensorMeta
from monarch._src.tensor.mesh import DeviceMesh, _stack, active_mesh_or_none
from monarch._src.tensor.stream import get_active_stream
from monarch._src.tensor.tensor import Tensor, check_usable

__all__ = ["dispatch", "fake_inputs", "fake_mode", "faking", "mesh_mode", "tensor_meta"]

_fake_mode: Any = None


def fake_mode() -> Any:
    """The controller's `FakeTensorMode` (one per process; fakes carry no data)."""
    global _fake_mode
    if _fake_mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        _fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    return _fake_mode


@contextlib.contextmanager
def faking() -> Iterator[None]:
    """Run torch on fake tensors here, with the mesh's dispatch mode out of the way."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), fake_mode():
        yield


# torch's TorchDispatchMode leaves __init_subclass__ and __init__ unannotated.
class _MeshMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Routes every aten op to `dispatch` while a mesh is active."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if not _stack or _stack[-1] is None:
            return func(*args, **(kwargs or {}))  # no_mesh: run locally
        return dispatch(func, args, kwargs or {})


@contextlib.contextmanager
def mesh_mode() -> Iterator[None]:
    """Install the dispatch mode for the block, unless an outer block already did."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    if any(isinstance(m, _MeshMode) for m in _get_current_dispatch_mode_stack()):
        yield
        return
    with _MeshMode():  # type: ignore[no-untyped-call]  # see the class
        yield


def tensor_meta(t: torch.Tensor) -> TensorMeta:
    """The `TensorMeta` (shape, dtype, device) of `t` for a command."""
    return TensorMeta(tuple(t.shape), str(t.dtype), str(t.device))


_WRITES: dict[Any, bool] = {}


def output_handles(
    out_flat: list[Any], mesh: DeviceMesh, stream: Any
) -> tuple[list[Any], list[int | None], list[TensorMeta]]:
    """For the flattened fake result of a remote function or endpoint: the values to hand back
    (a new distributed `Tensor` per fake tensor, other values as they are), the output id per
    flattened value kept by the workers, and the outputs' metadata."""
    results: list[Any] = []
    outputs: list[int | None] = []
    out_meta: list[TensorMeta] = []
    for o in out_flat:
        if isinstance(o, torch.Tensor):
            t = Tensor(o, mesh, mesh._engine.new_id(), stream)
            results.append(t)
            outputs.append(t._id)
            out_meta.append(tensor_meta(o))
        else:
            results.append(o)
    return results, outputs, out_meta


def _writes(func: Any) -> bool:
    w = _WRITES.get(func)
    if w is None:
        w = _WRITES[func] = any(
            a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments
        )
    return w


def fake_inputs(flat: list[Any], mesh: DeviceMesh | None, write: bool = False,
                lazy: bool = False,
                ) -> tuple[list[Any], list[Any], list[int], DeviceMesh | None, list[Tensor]]:
    """For flattened arguments: their fake versions, their command versions (Ref for
    distributed tensors), the ids read, the mesh they agree on, and the distributed tensors."""
    fakes: list[Any] = []
    cmd: list[Any] = []
    inputs: list[int] = []
    tensors: list[Tensor] = []
    for x in flat:
        if isinstance(x, Tensor):
            check_usable(x, write)
            if mesh is None:
                mesh = x._mesh
            elif not (x._mesh is mesh or x._mesh._same(mesh)):
                raise ValueError(
                    f"A tensor on {x._mesh!r} was used with tensors or an active mesh on "
                    f"{mesh!r}; move it first with t.to_mesh(mesh)."
                )
            fakes.append(None if lazy else x._fake)
            cmd.append(Ref(x._id))
            inputs.append(x._id)
            tensors.append(x)
        else:
            from monarch._src.tensor.opaque import OpaqueRef

            if isinstance(x, OpaqueRef):
                fakes.append(x)
                cmd.append(Ref(x._id))
                inputs.append(x._id)
            else:
                fakes.append(x)
                cmd.append(x)  # plain values and local tensors travel by value
    return fakes, cmd, inputs, mesh, tensors


_SIMPLE = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.memory_format,
           torch.layout)
# (op, positional count, kwarg names, per-leaf keys) -> (output spec, per-output plan, meta):
# lets repeated ops skip the fake-tensor run, the dominant cost of issuing an op.
_cache: dict[Any, Any] = {}
_CACHE_LIMIT = 4096


def _leaf_key(x: Any, seen: dict[int, int]) -> Any:
    if isinstance(x, Tensor):
        first = seen.setdefault(id(x), len(seen))
        return (first, tuple(x.shape), x.stride(), x.storage_offset(), x.dtype, x.device)
    if type(x) in _SIMPLE:
        return (type(x), x)
    if type(x) in (list, tuple) and all(type(v) in _SIMPLE for v in x):
        return (type(x), tuple(x))
    raise TypeError  # not cacheable


def dispatch(func: Any, args: Any, kwargs: Any) -> Any:
    """Issue `func(*args, **kwargs)` on the mesh; returns handles for its outputs."""
    # Under no_mesh.activate() (as outside activate()) an op on distributed tensors runs on
    # their own mesh, as on torchmonarch; only new local tensors stay local.
    flat, spec = _flatten(args, kwargs)
    write = _writes(func)
    _, cmd_flat, inputs, mesh, tensors = fake_inputs(flat, active_mesh_or_none(), write,
                                                         lazy=True)
    if mesh is None:
        raise ValueError(f"No mesh is active for {func}; use `with proc_mesh.activate():`.")
    try:
        seen: dict[int, int] = {}
        key: Any = (func, len(args), tuple(kwargs), tuple(_leaf_key(x, seen) for x in flat))
    except TypeError:
        key = None
    entry = _cache.get(key) if key is not None else None
    if entry is None:
        try:
            entry = _propagate(func, flat, spec, tensors, args, kwargs)
        except _NeedsValues:
            if tensors:
                # torchmonarch's type and text (the op's name), with what to do as a note
                exc = torch._subclasses.fake_tensor.DataDependentOutputException(func)
                if sys.version_info >= (3, 11):  # notes came with 3.11
                    exc.add_note(
                        f"{func} needs the tensor's values, which live on the workers; fetch "
                        "them first with monarch.inspect(t) or monarch.fetch_shard(t)."
                    )
                raise exc from None
            # Only local tensors (say, a fetched value): reading them is a local operation.
            from torch.utils._python_dispatch import _disable_current_modes

            with _disable_current_modes():
                return func(*args, **kwargs)
        if key is not None:
            if len(_cache) >= _CACHE_LIMIT:
                _cache.clear()
            _cache[key] = entry
    out_spec, plan, meta = entry
    stream = get_active_stream()
    engine = mesh._engine
    results: list[Any] = []
    outputs: list[int | None] = []
    for kind, value in plan:
        if kind == 0:  # a new tensor: value is its metadata
            t = Tensor(None, mesh, engine.new_id(), stream, value)
            outputs.append(t._id)
            results.append(t)
        elif kind == 1:  # an input returned (in-place op): value is its leaf index
            t = flat[value]
            outputs.append(t._id)
            results.append(t)
        else:
            results.append(value)
    cargs, ckwargs = _unflatten(cmd_flat, spec, args, kwargs)
    ranks = mesh.engine_ranks
    name = meta.name
    engine.submit(
        lambda seq: CallOp(seq, ranks, stream.name, name, cargs, ckwargs, tuple(inputs),
                           tuple(outputs), meta),
        depth=_user_depth(),
    )
    if out_spec is None:
        return results[0]
    return pytree.tree_unflatten(results, out_spec)


class _NeedsValues(Exception):
    """The op's result depends on tensor values (item(), equal(), ...)."""


_FAST = object()  # the "spec" of arguments that are all leaves: no pytree needed


def _is_leaf(x: Any) -> bool:
    if type(x) in (list, tuple):
        return not any(isinstance(v, torch.Tensor) or type(v) in (list, tuple, dict) for v in x)
    return type(x) is not dict


def _flatten(args: Any, kwargs: Any) -> tuple[list[Any], Any]:
    if all(_is_leaf(a) for a in args) and all(_is_leaf(v) for v in kwargs.values()):
        return [*args, *kwargs.values()], _FAST
    return pytree.tree_flatten((args, kwargs))


def _unflatten(flat: list[Any], spec: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
    if spec is _FAST:
        n = len(args)
        return tuple(flat[:n]), dict(zip(kwargs, flat[n:]))
    return pytree.tree_unflatten(flat, spec)  # type: ignore[no-any-return]


def _propagate(func: Any, flat: list[Any], spec: Any, tensors: list[Tensor], args: Any,
               kwargs: Any) -> Any:
    """Run `func` on fakes: (output spec, per-output plan, OpMeta)."""
    fakes = [x._fake if isinstance(x, Tensor) else x for x in flat]
    fargs, fkwargs = _unflatten(fakes, spec, args, kwargs)
    try:
        with fake_mode():
            fout = func(*fargs, **fkwargs)
    except (torch._subclasses.fake_tensor.DataDependentOutputException,
            torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode) as exc:
        raise _NeedsValues() from exc
    out_flat, tree_spec = pytree.tree_flatten(fout)
    out_spec: Any = tree_spec
    index = {id(x._fake): i for i, x in enumerate(flat) if isinstance(x, Tensor)}
    plan: list[tuple[int, Any]] = []
    out_meta: list[TensorMeta] = []
    for o in out_flat:
        if isinstance(o, torch.Tensor):
            i = index.get(id(o))
            if i is not None:
                plan.append((1, i))
            else:
                plan.append((0, (tuple(o.shape), o.stride(), o.storage_offset(), o.dtype,
                                 o.device)))
            out_meta.append(tensor_meta(o))
        else:
            plan.append((2, o))
    meta = OpMeta(func.name(), tuple(tensor_meta(t._fake) for t in tensors), tuple(out_meta))
    if len(plan) == 1 and isinstance(fout, torch.Tensor):
        out_spec = None  # a single tensor: no pytree on the way out
    return out_spec, plan, meta


def _user_depth() -> int:
    # Frames between `Engine.submit` and the code that issued the op do not matter for the
    # report; keep them (cheap) and let the formatted stack show the whole chain.
    return 2
