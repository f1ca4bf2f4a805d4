"""The simulated engine: a tensor-engine `Engine` whose workers are a simulation.

`SimEngine` subclasses the tensor engine's `Engine` and keeps all of its controller side (ids,
the ordered command buffer, batching and flushing, coalescing); only the seam differs. Batches
that the real engine would broadcast to `TensorWorker`s go to a `Session`, and requests to one
worker (`fetch`, `run_function`) are answered from the values' fake metadata: a fetch returns
zero-filled tensors of the right shape and dtype, and costs the simulated round trip.
Nothing is spawned and nothing runs on devices.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from monarch._src.lowlevel import Future
from monarch._src.shape import Shape, Slice
from monarch._src.simulator.session import Session
from monarch._src.tensor.commands import Ref
from monarch._src.tensor.engine import Engine

__all__ = ["SimEngine", "current_tag"]

_tag_lock = threading.Lock()
_tags: list[Any] = []  # the set_meta() stack (process-wide: the controller is one thread)
_live: set[SimEngine] = set()  # engines whose buffers must be flushed when the tag changes


def current_tag() -> Any:
    """The innermost `set_meta()` value, or None."""
    return _tags[-1] if _tags else None


def push_tag(value: Any) -> None:
    """Enter a `set_meta(value)` block: flush so earlier commands keep the earlier tag."""
    for engine in list(_live):
        engine.flush()
    with _tag_lock:
        _tags.append(value)


def pop_tag() -> None:
    """Leave a `set_meta()` block."""
    for engine in list(_live):
        engine.flush()
    with _tag_lock:
        _tags.pop()


class _Table:
    stopped = None  # a simulated mesh is never stopped under the engine


class _SimProcMesh:
    """What an `Engine` needs of its proc mesh: a name, an id, a shape and a table.

    A stand-in, not a ProcMesh: the engine reads these through `proc_mesh.mesh_id` and
    `proc_mesh.proc_table` (which read `_id` and `_table`) and the `MeshTrait` accessor
    `_shape`, so the attribute names here follow ProcMesh's.
    """

    def __init__(self, name: str, shape: Shape, session: Session) -> None:
        self._name = name
        self._id = f"sim-{uuid.uuid4().hex[:10]}"
        self._shape = shape
        self._table = _Table()
        self._session = session

    def __repr__(self) -> str:
        return f"<simulated proc mesh {self._name} {dict(self._shape.extent.items())}>"


class _Broadcast:
    def __init__(self, session: Session) -> None:
        self._session = session

    def broadcast(self, seq: int, commands: list[Any]) -> None:
        """Hand one batch to the simulation."""
        self._session.post_batch(commands, current_tag())


class _SimWorkers:
    """Stands where the engine keeps its `TensorWorker` actor mesh."""

    def __init__(self, session: Session) -> None:
        self.run = _Broadcast(session)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(
            f"The simulator has no workers to call {name!r} on: actor adverbs of remote "
            "functions (call, call_one, broadcast, ...) and rref calls run real code, so use a "
            "real proc mesh for them, or call the remote function inside `activate()` instead."
        )


class SimEngine(Engine):
    """A tensor engine over `hosts * gpus` simulated workers (dims "host", "gpu")."""

    def __init__(self, session: Session, labels: tuple[str, ...], sizes: tuple[int, ...]) -> None:
        strides, acc = [], 1
        for size in reversed(sizes):
            strides.append(acc)
            acc *= size
        shape = Shape(list(labels), Slice(offset=0, sizes=list(sizes),
                                          strides=list(reversed(strides))))
        self.session = session
        self.on_exit: list[Callable[[], None]] = []
        # The real constructor, over a stand-in proc mesh, with the simulation as its workers:
        # every controller-side field of the engine stays the tensor engine's own.
        # (`_SimProcMesh` has what the engine reads of a ProcMesh, without being one.)
        super().__init__(
            _SimProcMesh("simulator", shape, session),  # type: ignore[arg-type]
            workers=_SimWorkers(session),
        )
        _live.add(self)

    def call_worker(self, rank: int, method: str, args: tuple[Any, ...],
                    transform: Callable[[Any], Any]) -> Future[Any]:
        """Answer a request to worker `rank` from fake metadata, costing the round trip."""
        self.flush()
        if method == "fetch":
            (tree,) = args
            ids = _refs(tree)
            self.session.fetch(rank, ids)
            from monarch._src.tensor.mesh import no_mesh

            with no_mesh.activate():
                value = self._fake_values(rank, tree)
            return Future.from_value(transform(value))
        if method in ("run_function", "call"):
            from monarch._src.tensor.worker import resolve_function

            fn, fargs, fkwargs = args
            ids = _refs((fargs, fkwargs))
            self.session.fetch(rank, ids)
            from monarch._src.tensor.mesh import no_mesh

            with no_mesh.activate():
                values = self._fake_values(rank, (fargs, fkwargs))
                result = resolve_function(fn)(*values[0], **values[1])
            return Future.from_value(transform(result))
        raise NotImplementedError(
            f"The simulator cannot answer worker request {method!r}; it simulates fetch_shard, "
            "inspect and call_on_shard_and_fetch."
        )

    def _fake_values(self, rank: int, tree: Any) -> Any:
        """`tree` with each `Ref` replaced by zeros of the value's shape and dtype."""
        import torch
        import torch.utils._pytree as pytree

        self.session.drain()
        metas = self.session.model.workers[rank].meta_of

        def fake(x: Any) -> Any:
            if type(x) is not Ref:
                return x
            meta = metas.get(x.id)
            if meta is None:
                raise ValueError(
                    f"The simulated worker at rank {rank} holds no tensor {x.id}: it lives on "
                    "other ranks of the mesh, was deleted, or is an opaque object the simulator "
                    "cannot fetch."
                )
            dtype = getattr(torch, meta.dtype.replace("torch.", ""))
            return torch.zeros(meta.shape, dtype=dtype)

        return pytree.tree_map(fake, tree, is_leaf=lambda x: type(x) is Ref)

    def rref_ports(self) -> list[Any]:
        """Not available: rref calls need real actors."""
        raise NotImplementedError(
            "The simulator cannot call actor endpoints with rref (they run real code); use a "
            "real proc mesh."
        )

    def exit(self) -> None:
        """Flush, finish the simulation (outputs are written) and close this engine."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        _live.discard(self)
        for hook in self.on_exit:
            hook()


def _refs(tree: Any) -> list[int]:
    import torch.utils._pytree as pytree

    return [x.id for x in pytree.tree_leaves(tree, is_leaf=lambda x: type(x) is Ref)
            if type(x) is Ref]
