"""Command histories: the message stream of a run, saved to a file and replayed standalone.

`record(device_mesh_or_proc_mesh, path)` wraps a REAL tensor engine without changing its code:
the engine's worker mesh is put behind a proxy whose `run.broadcast` notes each batch (with the
controller's time) before forwarding it, and `call_worker` is wrapped on the instance to note
fetches. Leaving the block restores both and writes the file. A simulated mesh records its own
stream the same way (`command_history_path`). `load(path)` reads a file back and
`replay(history, ...)` drives a fresh simulation with it, at the recorded controller times.

The file is a pickle of a dict: `version`, `labels`, `sizes` (the mesh), `events`, a list of
`(kind, seconds, data)` with kind "batch" (`(commands, tag)`), "fetch" (`(rank, ids)`) or
"step" (None). Objects that cannot be pickled (an actor mesh inside `CallActor`, a local
function inside `CallRemote`) are stored by name: they are not needed to simulate.
"""

from __future__ import annotations

import contextlib
import pickle
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from monarch._src.simulator.network import CommModel
from monarch._src.simulator.profiles import DeviceProfile
from monarch._src.simulator.session import Session
from monarch._src.tensor.commands import CallActor, CallRemote, Ref

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.tensor.mesh import DeviceMesh

__all__ = ["load", "record", "replay", "save"]

VERSION = 1


def _portable(cmd: Any) -> Any:
    """`cmd` with what need not travel (meshes, closures) replaced by names."""
    if type(cmd) is CallActor:
        cmd = cmd._replace(mesh=getattr(cmd.mesh, "_name", repr(cmd.mesh)))
    if type(cmd) is CallRemote and not isinstance(cmd.fn, str):
        try:
            pickle.dumps(cmd.fn)
        except Exception:
            cmd = cmd._replace(fn=getattr(cmd.fn, "__qualname__", repr(cmd.fn)))
    try:
        pickle.dumps(cmd)
    except Exception:
        cmd = cmd._replace(args=_names(cmd.args), kwargs=_names(cmd.kwargs))
    return cmd


def _names(tree: Any) -> Any:
    if type(tree) is Ref:
        return tree
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        return type(tree)(_names(x) for x in tree)
    if isinstance(tree, dict):
        return {k: _names(v) for k, v in tree.items()}
    try:
        pickle.dumps(tree)
        return tree
    except Exception:
        return repr(tree)


def save(path: str, labels: tuple[str, ...], sizes: tuple[int, ...],
         events: list[tuple[str, float, Any]]) -> None:
    """Write a history file."""
    out = []
    for kind, t, data in events:
        if kind == "batch":
            commands, tag = data
            data = ([_portable(c) for c in commands], tag)
        out.append((kind, t, data))
    with open(path, "wb") as f:
        pickle.dump({"version": VERSION, "labels": tuple(labels), "sizes": tuple(sizes),
                     "events": out}, f, protocol=5)


def load(path: str) -> dict[str, Any]:
    """Read a history file written by `save`/`record` (ValueError if it is not one)."""
    with open(path, "rb") as f:
        try:
            data = pickle.load(f)
        except Exception as e:
            raise ValueError(f"{path!r} is not a monarch command history file: {e}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(
            f"{path!r} is not a monarch command history file (version {VERSION}); record one "
            "with monarch.simulator.record() or Simulator(command_history_path=...)."
        )
    return data


def replay(history: dict[str, Any], profile: DeviceProfile, comm: CommModel) -> Session:
    """Simulate a loaded history at its recorded controller times; returns the session."""
    world = 1
    for s in history["sizes"]:
        world *= s
    session = Session(world, profile, comm)
    for kind, t, data in history["events"]:
        if kind == "batch":
            commands, tag = data
            session.post_batch(commands, tag, at=t)
        elif kind == "fetch":
            rank, ids = data
            session.fetch(rank, ids, at=t)
        elif kind == "step":
            session.step(at=t)
        else:
            raise ValueError(f"Unknown history event kind {kind!r} in the command history.")
    session.drain()
    return session


class _RecordingRun:
    def __init__(self, real: Any, events: list[tuple[str, float, Any]], t0: float) -> None:
        self._real = real
        self._events = events
        self._t0 = t0

    def broadcast(self, seq: int, commands: list[Any]) -> Any:
        """Note the batch, then send it to the real workers."""
        self._events.append(("batch", time.perf_counter() - self._t0, (list(commands), None)))
        return self._real.broadcast(seq, commands)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _RecordingWorkers:
    def __init__(self, real: Any, events: list[tuple[str, float, Any]], t0: float) -> None:
        self._real = real
        self.run = _RecordingRun(real.run, events, t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class Recorder:
    """What `record()` yields: the events so far, and `step()` to mark iterations."""

    def __init__(self, events: list[tuple[str, float, Any]], t0: float) -> None:
        self.events = events
        self._t0 = t0

    def step(self) -> None:
        """Mark the end of an iteration in the recording."""
        self.events.append(("step", time.perf_counter() - self._t0, None))


@contextlib.contextmanager
def record(mesh: DeviceMesh | ProcMesh, path: str) -> Iterator[Recorder]:
    """Record the command stream a REAL tensor engine sends while the block runs, to `path`.

    `mesh` is a proc mesh or a device mesh. The engine is created if needed.
    """
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.tensor.mesh import DeviceMesh, engine_of

    if not isinstance(mesh, (DeviceMesh, ProcMesh)):
        raise TypeError(f"record() needs a proc mesh or a DeviceMesh, got {type(mesh).__name__}.")
    engine = engine_of(mesh)
    engine.flush()
    events: list[tuple[str, float, Any]] = []
    t0 = time.perf_counter()
    real_workers = engine.workers
    real_call = engine.call_worker

    def call_worker(rank: int, method: str, args: tuple[Any, ...], transform: Any) -> Any:
        import torch.utils._pytree as pytree

        engine.flush()
        ids = [x.id for x in pytree.tree_leaves(args, is_leaf=lambda x: type(x) is Ref)
               if type(x) is Ref]
        events.append(("fetch", time.perf_counter() - t0, (rank, ids)))
        return real_call(rank, method, args, transform)

    engine.workers = _RecordingWorkers(real_workers, events, t0)
    engine.call_worker = call_worker  # type: ignore[method-assign]
    try:
        yield Recorder(events, t0)
    finally:
        engine.flush()
        engine.workers = real_workers
        del engine.call_worker
        shape = engine.proc_mesh._shape
        save(path, tuple(shape.labels), tuple(shape.extent.sizes), events)
