"""Controller side: the per-proc-mesh `Engine`, which owns the workers and the command stream.

Design: commands are appended to one buffer per engine and flushed as a single `run` broadcast
(one envelope per proc) when the buffer is full, when a value is needed (fetch, remote call,
a tensor passed to an actor), when `activate()` or `coalescing()` exits, or on a deferred flush
scheduled on the runtime loop after the first command of a batch. So the controller never
waits per op and workers start as soon as the loop runs. The rejected alternative, one envelope
per op, costs a pickle and a post per op and caps throughput at the transport's message rate.

The engine is the seam for another backend: `Engine.backend` receives `run(seq, commands)`
broadcasts, `call_worker` requests, and nothing else.

Figures: a batch leaves at `_BATCH_LIMIT` (512) commands or `_FLUSH_DELAY` (2 ms) after its first
command, whichever comes first. A collected `Tensor` handle queues its id with the last sequence
number issued; at the flush its `Delete` goes right after that command, so the memory it frees
(workers pool large freed buffers) is reused by the commands that follow. The first
`activate()` makes the engine through the `mesh_engine` slot: it hosts a `TCPStore` on the
controller for process-group rendezvous and spawns a `TensorWorker` on every proc of the root
proc mesh; other packages reach a proc mesh's engine and `DeviceMesh` only through `mesh.py`'s
`engine_of` and `device_mesh_of`.
"""

from __future__ import annotations

import collections
import itertools
import secrets
import sys
import threading
import traceback
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from monarch._src.config import get as config_get
from monarch._src.config.duration import parse_duration_seconds
from monarch._src.lowlevel import Future, OncePort, casting, decode_reply, get_runtime
from monarch._src.mesh.proc_mesh import mesh_id, proc_table, root_of
from monarch._src.tensor.commands import Delete
from monarch._src.tensor.errors import RemoteException, WorkerError

if TYPE_CHECKING:
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.tensor.mesh import DeviceMesh

__all__ = ["Engine", "engine_by_id", "engine_for"]

# Proc mesh id -> its engine, created on first activation.
_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()

# Commands kept in one batch before it is sent without waiting for a sync point.
_BATCH_LIMIT = 512
# Seconds a partial batch waits for more commands before it is sent without a sync point.
_FLUSH_DELAY = 0.002
# Controller tracebacks kept for error reports (by command sequence number).
_TRACEBACKS_KEPT = 20_000


def _place_deletes(commands: list[Any], released: list[tuple[int, int]]) -> list[Any]:
    """`commands` with a `Delete` for the released ids placed right after the last command
    issued before each release, so a freed buffer is reusable by the commands that follow.

    `released` holds `(id, seq)`: `seq` is the sequence number of the last command issued when
    the id was freed; no command issued later can read it.
    """
    released.sort(key=lambda r: r[1])
    out: list[Any] = []
    i = 0
    for cmd in commands:
        seq = getattr(cmd, "seq", None)
        if seq is not None:
            ids = []
            while i < len(released) and released[i][1] < seq:
                ids.append(released[i][0])
                i += 1
            if ids:
                out.append(Delete(tuple(ids)))
        out.append(cmd)
    if i < len(released):
        out.append(Delete(tuple(ident for ident, _ in released[i:])))
    return out


def engine_for(proc_mesh: ProcMesh) -> Engine:
    """The engine of `proc_mesh`'s root mesh, created (workers spawned) on first use."""
    key = mesh_id(proc_mesh)
    with _engines_lock:
        stopped = [k for k, e in _engines.items() if proc_table(e.proc_mesh).stopped is not None]
        for stale in stopped:
            _engines[stale].closed = True
            del _engines[stale]
        engine = _engines.get(key)
        if engine is None or engine.closed:
            engine = _engines[key] = Engine(root_of(proc_mesh))
    return engine


def engine_by_id(engine_id: str) -> Engine | None:
    """The live engine with id `engine_id` in this process, if any."""
    with _engines_lock:
        for engine in _engines.values():
            if engine.id == engine_id:
                return engine
    return None


class Engine:
    """Workers on every proc of one proc mesh, and the ordered command stream to them."""

    def __init__(self, proc_mesh: ProcMesh, workers: Any = None) -> None:
        """Spawn `TensorWorker`s on `proc_mesh`; or, with `workers`, hand every batch and worker
        request to that object instead (the seam another backend, the simulator, plugs into)."""
        from torch._C._distributed_c10d import TCPStore

        from monarch._src.tensor import actor_calls  # noqa: F401 - installs the endpoint hook
        from monarch._src.tensor.worker import TensorWorker

        self.id = f"te-{uuid.uuid4().hex[:10]}"
        self.proc_mesh = proc_mesh  # the root proc mesh; device meshes are views of it
        self.global_ranks: list[int] = proc_mesh._shape.ranks()  # engine rank -> table rank
        self.rank_of = {g: i for i, g in enumerate(self.global_ranks)}  # table rank -> engine
        self.size = len(self.global_ranks)
        self.timeout = parse_duration_seconds(str(config_get("tensor_engine_timeout")))
        if workers is None:
            # The rendezvous for process groups; workers connect as clients on first collective.
            self.store: Any = TCPStore(
                "127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=True,
            )
            store_addr = ("127.0.0.1", self.store.port)
            seed = secrets.randbits(48)
            workers = proc_mesh.spawn(
                f"tensor_engine_{self.id}", TensorWorker, self.id, store_addr, self.timeout, seed,
                True,
            )
        else:
            self.store = None  # another backend (the simulator) has no process groups
        self.workers: Any = workers
        self._lock = threading.RLock()  # guards the buffer, sequence numbers and flushing
        self._buffer: list[Any] = []  # commands not yet sent, in order
        # (id, last sequence number issued when it was freed), from any thread
        self._deletes: collections.deque[tuple[int, int]] = collections.deque()
        self._ids = itertools.count(1)
        self._seq = 0  # sequence number of the last command issued
        self.batch_seq = 0  # sequence number of the last batch sent
        self._flush_scheduled = False
        self._tracebacks: collections.OrderedDict[int, Any] = collections.OrderedDict()
        self._hold = 0  # >0 inside coalescing(): no flush on size or timer
        self._rref_ports: list[Any] | None = None  # per engine rank, fetched on first use
        self.closed = False
        self.flushing_thread: int | None = None  # the thread pickling a batch, while it does
        from monarch._src.tensor.mesh import DeviceMesh

        self.root_mesh = DeviceMesh._create(self, proc_mesh._shape)

    # ---- ids and commands ---------------------------------------------------------------
    def new_id(self) -> int:
        """A fresh value id (never reused within this engine)."""
        return next(self._ids)

    def ranks_of(self, mesh: DeviceMesh) -> tuple[int, ...] | None:
        """Engine ranks of `mesh`, or None when it covers the whole engine."""
        ranks = mesh._shape.ranks()
        if len(ranks) == self.size:
            return None
        return tuple(self.rank_of[g] for g in ranks)

    def submit(self, make: Callable[[int], Any], depth: int = 2) -> int:
        """Append the command `make(seq)` to the stream; returns its sequence number."""
        if self.closed or proc_table(self.proc_mesh).stopped is not None:
            if proc_table(self.proc_mesh).stopped is not None:
                raise RuntimeError(
                    f"The procs of {self.proc_mesh!r} were stopped; their distributed tensors "
                    "are gone. Spawn new procs to compute again."
                )
            raise RuntimeError(
                f"The tensor engine of {self.proc_mesh!r} was exited; activate the proc mesh "
                "again to start a new one."
            )
        frames = _stack(sys._getframe(depth))
        with self._lock:
            self._seq += 1
            seq = self._seq
            self._buffer.append(make(seq))
            tbs = self._tracebacks
            tbs[seq] = frames  # formatted only if it is ever reported
            if len(tbs) > _TRACEBACKS_KEPT:
                tbs.popitem(last=False)
            if self._hold == 0:
                if len(self._buffer) >= _BATCH_LIMIT:
                    self._flush_locked()
                elif not self._flush_scheduled:
                    self._flush_scheduled = True
                    loop = get_runtime().loop
                    loop.call_soon_threadsafe(loop.call_later, _FLUSH_DELAY, self._deferred_flush)
        return seq

    def release(self, ident: int) -> None:
        """The controller dropped the tensor `ident` (any thread, also from a finalizer)."""
        # Every command that reads `ident` was issued before this: its Delete may go right
        # after them, ahead of commands issued later (which can then reuse its memory).
        self._deletes.append((ident, self._seq))

    def _deferred_flush(self) -> None:
        with self._lock:
            self._flush_scheduled = False
            if self._hold == 0:
                self._flush_locked()

    def flush(self) -> int:
        """Send every buffered command now; returns the sequence number of the last batch."""
        with self._lock:
            self._flush_locked()
            return self.batch_seq

    def _flush_locked(self) -> None:
        if self._deletes:
            released = []
            while self._deletes:
                released.append(self._deletes.popleft())
            self._buffer = _place_deletes(self._buffer, released)
        if not self._buffer or self.closed:
            return
        if proc_table(self.proc_mesh).stopped is not None:
            # The procs are gone: nothing can run any more (later submits raise).
            self._buffer.clear()
            self.closed = True
            return
        batch, self._buffer = self._buffer, []
        self.batch_seq += 1
        self.flushing_thread = threading.get_ident()
        try:
            try:
                self.workers.run.broadcast(self.batch_seq, batch)
            except Exception:  # noqa: BLE001 - a command that does not pickle fails alone
                self.workers.run.broadcast(self.batch_seq, _replace_unpicklable(batch))
        finally:
            self.flushing_thread = None

    # ---- holding batches (coalescing) ---------------------------------------------------
    def hold(self) -> None:
        """Stop sending partial batches until the matching `unhold` (coalescing)."""
        with self._lock:
            self._hold += 1

    def unhold(self) -> None:
        """End one `hold`; the last one sends what was held as one batch."""
        with self._lock:
            self._hold -= 1
            if self._hold == 0:
                self._flush_locked()

    # ---- requests to one worker -----------------------------------------------------------
    def call_worker(self, rank: int, method: str, args: tuple[Any, ...],
                    transform: Callable[[Any], Any]) -> Future[Any]:
        """Ask the worker at engine `rank` (after everything issued so far); its `(ok, value)`
        answer goes through `transform` when ok, or raises `RemoteException`."""
        self.flush()
        here = _stack(sys._getframe(1))
        endpoint = getattr(self.workers, method)
        entry = OncePort()
        cast = casting.plan(self.workers)
        reply = get_runtime().mailbox.open_port(entry, (cast.procs[self.global_ranks[rank]],))
        casting.post_call(self.workers, method, casting.encode_args(endpoint, args, {}), reply,
                          [rank], cast=cast)

        def decode(raw: Any) -> Any:
            ok, value = local_decode(raw)
            if not ok:
                raise self.remote_exception(value, here)
            return transform(value)

        return Future.from_concurrent(entry.cf, decode)

    def remote_exception(self, error: WorkerError, here: Any = None) -> RemoteException:
        """The controller-side exception for a worker's poison record (`here`: the stack of
        the request, for errors of the request itself)."""
        frames = self._tracebacks.get(error.seq) if error.seq >= 0 else here
        if frames is not None:
            text = _format_stack(frames)
        else:
            text = "  (the controller traceback of this operation is no longer kept)\n"
        return RemoteException(error.rank, error.text, text)

    def rref_ports(self) -> list[Any]:
        """The ports on each worker where actors reply: `(rref results, replies of endpoint
        calls with distributed tensors among their arguments)`, by engine rank."""
        if self._rref_ports is None:
            from monarch._src.tensor.fetch import wait

            vm = wait(self.workers.reply_ports.call(), self.timeout)
            self._rref_ports = [v for _, v in vm.items()]
        return self._rref_ports

    def exit(self) -> None:
        """Flush, ask the workers to forget everything, and close this engine."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        try:
            from monarch._src.tensor.fetch import wait

            wait(self.workers.exit.call(), self.timeout)
        finally:
            with _engines_lock:
                if _engines.get(mesh_id(self.proc_mesh)) is self:
                    del _engines[mesh_id(self.proc_mesh)]


def _stack(frame: Any, limit: int = 40) -> tuple[tuple[Any, int], ...]:
    """(code, line) pairs from the outermost frame in: cheap, and holds no frame alive."""
    out: list[tuple[Any, int]] = []
    while frame is not None and len(out) < limit:
        out.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    out.reverse()
    return tuple(out)


def _format_stack(frames: tuple[tuple[Any, int], ...]) -> str:
    summary = traceback.StackSummary.from_list(
        [(code.co_filename, line, code.co_name, None) for code, line in frames]
    )
    return "".join(summary.format())


def local_decode(raw: Any) -> Any:
    """Decode a reply with dispatch off: tensors in it are local, not distributed."""
    from torch.utils._python_dispatch import _disable_current_modes

    from monarch._src.tensor.mesh import no_mesh

    with _disable_current_modes(), no_mesh.activate():
        return decode_reply(raw)


def _replace_unpicklable(batch: list[Any]) -> list[Any]:
    """`batch` with each command that cannot be pickled replaced by one that fails on the
    workers with the pickling error (so its outputs are poisoned and the fetch says why)."""
    from monarch._src.lowlevel import encode
    from monarch._src.tensor.commands import CallRemote, OpMeta

    out: list[Any] = []
    for cmd in batch:
        try:
            encode(cmd)
            out.append(cmd)
        except Exception as exc:  # noqa: BLE001 - reported through the poisoned outputs
            outputs = getattr(cmd, "outputs", None) or (getattr(cmd, "out", None),)
            text = f"The operation could not be sent to the workers: {type(exc).__name__}: {exc}"
            out.append(CallRemote(
                cmd.seq, cmd.ranks, cmd.stream, "monarch._src.tensor.worker.fail_with", (text,),
                {}, (), tuple(outputs), OpMeta("unsendable", (), ()),
            ))
    return out
