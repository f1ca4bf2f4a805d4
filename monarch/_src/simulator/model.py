"""The execution and memory model: what every worker would do with a command stream, and when.

Each simulated worker has a host thread (it takes commands in arrival order, paying the
profile's per-command overhead) and one in-order queue per stream. A task starts when its
stream is free, the host has issued it, and every value it reads is ready (values produced on
another stream make it wait: that is the cross-stream dependency; a borrowed value becomes
ready on the borrowing stream when its producer finished, and dropping a mutable borrow makes
the original stream wait for the borrower's last write). In-place writes also wait for the last
reader of the storage they write. A collective starts only when every member of its group
arrived, and all members finish together. On a synchronous device (a CPU worker) the host is
blocked until its operation ends, as the real worker is.

Because every worker receives the same commands in the same order, and a stream runs its tasks
in order, the model processes the stream once, command by command across all ranks: each
task's start is the latest of the events it waits for. This is exact for the model and needs no
event queue.

Memory is accounted per storage: an operator output that the schema marks as aliasing an input
(a view, or an in-place result), and a borrow, share the input's storage; every other output
allocates `numel * itemsize` bytes, charged to the stream that created it. A storage is freed
when the last value naming it is deleted. Outputs the controller does not keep are allocated
and freed at once (they still count towards the peak). Allocation and free events are stamped
with the worker's host time, which never goes backwards, so the timeline is in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from monarch._src.simulator.costs import alias_map, nbytes, op_cost, op_time, writes_input
from monarch._src.simulator.network import CommModel
from monarch._src.simulator.profiles import DeviceProfile
from monarch._src.tensor.commands import (
    Borrow,
    CallActor,
    CallOp,
    CallRemote,
    Delete,
    Reduce,
    Ref,
    SendTensor,
    TensorMeta,
)

__all__ = ["MemoryEvent", "SimulationModel", "Task", "WorkerModel"]


@dataclasses.dataclass
class Task:
    """One piece of work on one worker's stream, with simulated start and end (seconds)."""

    rank: int
    stream: str
    name: str
    start: float
    end: float
    seq: int
    category: str  # "compute", "collective", "transfer", "remote", "actor"
    tag: Any = None  # the set_meta() value active when the command was issued
    flops: float = 0.0
    bytes: float = 0.0


@dataclasses.dataclass
class MemoryEvent:
    """Bytes allocated on one worker after an allocation or free at `time`."""

    time: float
    rank: int
    stream: str
    delta: int
    live: int  # bytes live on the worker after the event
    stream_live: int  # bytes live on the stream after the event
    storage: int = 0  # which storage (a number unique per worker)


class _Storage:
    __slots__ = ("key", "refs", "size", "stream")

    def __init__(self, size: int, stream: str, key: int) -> None:
        self.size = size
        self.stream = stream
        self.refs = 0
        self.key = key


class WorkerModel:
    """The simulated state of one worker: clocks, value readiness, storages and tasks."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.host_free = 0.0  # when the worker's host thread takes its next command
        self.streams: dict[str, float] = {}  # stream -> when it is free
        self.ready: dict[int, float] = {}  # value id -> when its value exists
        self.last_use: dict[int, float] = {}  # value id -> end of the last task reading it
        self.storage_of: dict[int, _Storage] = {}
        self.meta_of: dict[int, TensorMeta] = {}
        self.live = 0
        self.peak = 0
        self.window_peak = 0  # peak since the last iteration mark
        self.stream_live: dict[str, int] = {}
        self.stream_peak: dict[str, int] = {}
        self.tasks: list[Task] = []
        self.memory: list[MemoryEvent] = []
        self._keys = 0

    # ---- clocks --------------------------------------------------------------------------
    def stream_free(self, stream: str) -> float:
        """When `stream` can start its next task."""
        return self.streams.get(stream, 0.0)

    def inputs_ready(self, ids: Iterable[int]) -> float:
        """When every value in `ids` exists."""
        return max((self.ready.get(i, 0.0) for i in ids), default=0.0)

    def finished(self) -> float:
        """When everything issued to this worker so far has finished."""
        return max([self.host_free, *self.streams.values()], default=0.0)

    # ---- memory --------------------------------------------------------------------------
    def _event(self, time: float, stream: str, delta: int, key: int) -> None:
        self.live += delta
        sl = self.stream_live.get(stream, 0) + delta
        self.stream_live[stream] = sl
        if self.live > self.peak:
            self.peak = self.live
        if self.live > self.window_peak:
            self.window_peak = self.live
        if sl > self.stream_peak.get(stream, 0):
            self.stream_peak[stream] = sl
        self.memory.append(MemoryEvent(time, self.rank, stream, delta, self.live, sl, key))

    def bind(self, ident: int | None, storage: _Storage, meta: TensorMeta | None) -> None:
        """Make value `ident` name `storage` (dropping what it named before)."""
        if ident is None:
            return
        storage.refs += 1
        old = self.storage_of.get(ident)
        self.storage_of[ident] = storage
        if meta is not None:
            self.meta_of[ident] = meta
        if old is not None:
            self._decref(old)

    def allocate(self, time: float, stream: str, size: int) -> _Storage:
        """A new storage of `size` bytes created by `stream` at `time`."""
        self._keys += 1
        storage = _Storage(size, stream, self._keys)
        self._event(time, stream, size, storage.key)
        return storage

    def _decref(self, storage: _Storage) -> None:
        storage.refs -= 1
        if storage.refs == 0:
            self._event(self.host_free, storage.stream, -storage.size, storage.key)

    def release_if_unbound(self, storage: _Storage) -> None:
        """Free a storage nobody names (an output the controller did not keep)."""
        if storage.refs == 0:
            self._event(self.host_free, storage.stream, -storage.size, storage.key)

    def forget(self, ident: int) -> None:
        """The controller deleted value `ident`."""
        self.ready.pop(ident, None)
        self.last_use.pop(ident, None)
        self.meta_of.pop(ident, None)
        storage = self.storage_of.pop(ident, None)
        if storage is not None:
            self._decref(storage)


class SimulationModel:
    """All workers of one engine, advanced by whole command batches."""

    def __init__(self, world: int, profile: DeviceProfile, comm: CommModel,
                 host_profile: DeviceProfile | None = None) -> None:
        if world < 1:
            raise ValueError(f"A simulation needs at least one worker, got world={world}.")
        self.world = world
        self.profile = profile
        self.comm = comm
        # When set (GPU profiles only), operators whose tensors are all on the CPU are costed
        # with these rates and block the worker's host thread, as CPU work does.
        self.host_profile = host_profile if profile.kind == "gpu" else None
        self.workers = [WorkerModel(r) for r in range(world)]

    # ---- entry points --------------------------------------------------------------------
    def run_batch(self, commands: list[Any], arrival: float, tag: Any = None) -> None:
        """Process one batch that reaches every worker at simulated time `arrival`."""
        for w in self.workers:
            if w.host_free < arrival:
                w.host_free = arrival
        for cmd in commands:
            kind = type(cmd)
            if kind is Delete:
                for w in self.workers:
                    for i in cmd.ids:
                        w.forget(i)
            elif kind is CallOp or kind is CallRemote or kind is CallActor:
                targets = self._targets(cmd.ranks)
                if targets:
                    plan = self._plan(targets[0], cmd)  # the same on every rank
                    for w in targets:
                        self._call(w, cmd, tag, plan)
            elif kind is Reduce:
                self._reduce(cmd, tag)
            elif kind is SendTensor:
                self._send(cmd, tag)
            elif kind is Borrow:
                for w in self._targets(cmd.ranks):
                    self._borrow(w, cmd)
            else:
                raise TypeError(
                    f"The simulator cannot model command {kind.__name__}; it knows CallOp, "
                    "CallRemote, CallActor, Reduce, SendTensor, Borrow and Delete."
                )

    def fetch(self, rank: int, ids: Iterable[int], request: float) -> float:
        """When the controller gets values `ids` of worker `rank`, asked at time `request`."""
        p = self.profile
        w = self.workers[rank]
        ids = list(ids)
        arrive = request + p.message_latency
        start = max(w.host_free, arrive) + p.worker_overhead
        start = max(start, w.inputs_ready(ids))
        size = sum(nbytes(w.meta_of[i]) for i in ids if i in w.meta_of)
        copy = size / p.memory_bandwidth if p.memory_bandwidth > 0 else 0.0
        w.host_free = start + copy
        return start + copy + p.message_latency

    def finished(self) -> float:
        """When every worker has finished everything issued so far."""
        return max(w.finished() for w in self.workers)

    # ---- helpers -------------------------------------------------------------------------
    def _targets(self, ranks: tuple[int, ...] | None) -> list[WorkerModel]:
        if ranks is None:
            return self.workers
        return [self.workers[r] for r in ranks if 0 <= r < self.world]

    def _issue(self, w: WorkerModel) -> float:
        """The worker's host takes one command; returns when the command is issued."""
        w.host_free += self.profile.worker_overhead
        return w.host_free

    def _finish(self, w: WorkerModel, stream: str, end: float) -> None:
        w.streams[stream] = end
        if self.profile.synchronous and end > w.host_free:
            w.host_free = end

    def _plan(self, w: WorkerModel, cmd: Any) -> tuple[Any, ...]:
        """(cost, duration, name, category, aliases) of a call command; computed once per
        command, since metadata (and so the cost) is the same on every rank."""
        p = self.profile
        meta = cmd.meta
        kind = type(cmd)
        if kind is CallOp:
            cost = op_cost(meta, cmd.args, cmd.kwargs, _Shapes(w.meta_of))
            dtype = meta.outputs[0].dtype if meta.outputs else "float32"
            host = self.host_profile
            if host is not None and not _all_cpu(meta):
                host = None
            on_host = host is not None
            duration = op_time(cost, dtype, host if host is not None else p)
            return (cost, duration, cmd.op, "cpu" if on_host else "compute",
                    alias_map(cmd.op, len(cmd.outputs)))
        if kind is CallRemote:
            size = sum(nbytes(m) for m in (*meta.inputs, *meta.outputs))
            name = meta.name or (cmd.fn if isinstance(cmd.fn, str) else getattr(
                cmd.fn, "__qualname__", "remote"))
            return (None, p.op_overhead + size / p.memory_bandwidth, name, "remote",
                    [None] * len(cmd.outputs))
        return (None, 2 * p.message_latency + p.worker_overhead, f"actor.{cmd.method}", "actor",
                [None] * len(cmd.outputs))

    def _call(self, w: WorkerModel, cmd: Any, tag: Any, plan: tuple[Any, ...]) -> None:
        cost, duration, name, category, aliases = plan
        meta = cmd.meta
        kind = type(cmd)
        issued = self._issue(w)
        start = max(issued, w.stream_free(cmd.stream), w.inputs_ready(cmd.inputs))
        if kind is CallOp:  # in-place writes wait for the earlier readers of what they write
            for j, where in enumerate(aliases):
                ident = _arg(cmd.args, cmd.kwargs, where)
                if ident is not None and writes_input(cmd.op, j):
                    start = max(start, w.last_use.get(ident, 0.0))
        end = start + duration
        w.tasks.append(Task(w.rank, cmd.stream, name, start, end, cmd.seq, category, tag,
                            cost.flops if cost else 0.0, cost.bytes if cost else 0.0))
        for i in cmd.inputs:
            if w.last_use.get(i, 0.0) < end:
                w.last_use[i] = end
        outs = list(meta.outputs)
        for j, ident in enumerate(cmd.outputs):
            out_meta = outs[j] if j < len(outs) else None
            src = aliases[j] if j < len(aliases) else None
            src_id = _arg(cmd.args, cmd.kwargs, src) if src is not None else None
            if src_id is not None and src_id in w.storage_of:
                storage = w.storage_of[src_id]
            else:
                size = nbytes(out_meta) if out_meta is not None else 0
                storage = w.allocate(issued, cmd.stream, size)
            if ident is None:
                w.release_if_unbound(storage)
                continue
            w.bind(ident, storage, out_meta)
            w.ready[ident] = end
            w.last_use.pop(ident, None)
        self._finish(w, cmd.stream, end)
        if category == "cpu" and end > w.host_free:
            w.host_free = end  # CPU work runs on the worker's own thread

    def _reduce(self, cmd: Reduce, tag: Any) -> None:
        p = self.profile
        targets = {w.rank for w in self._targets(cmd.ranks)}
        in_meta = cmd.meta.inputs[0] if cmd.meta.inputs else None
        out_meta = cmd.meta.outputs[0] if cmd.meta.outputs else in_meta
        in_bytes = nbytes(in_meta) if in_meta is not None else 0
        out_bytes = nbytes(out_meta) if out_meta is not None else in_bytes
        if cmd.reduction == "stack":
            kind, size = ("all_to_all", in_bytes) if cmd.scatter else ("all_gather", out_bytes)
        else:
            kind, size = ("reduce_scatter", in_bytes) if cmd.scatter else ("all_reduce", in_bytes)
        name = f"{kind}({cmd.reduction})" if cmd.reduction != "stack" else kind
        for group in cmd.groups:
            members = [self.workers[r] for r in group if r in targets]
            if not members:
                continue
            issued = {w.rank: self._issue(w) for w in members}
            arrive = max(max(issued[w.rank], w.stream_free(cmd.stream),
                             w.inputs_ready((cmd.src,))) for w in members)
            duration = self.comm.collective_time(kind, size, tuple(group))
            if len(group) > 1:
                # The engine's members first agree whether any input failed (a one-element
                # int64 MAX all-reduce, see tensor/collective_exec.run_reduce).
                duration += self.comm.collective_time("all_reduce", 8, tuple(group))
            if cmd.reduction == "avg":
                duration += out_bytes * 2 / p.memory_bandwidth
            duration += p.op_overhead
            end = arrive + duration
            for w in members:
                w.tasks.append(Task(w.rank, cmd.stream, name, arrive, end, cmd.seq,
                                    "collective", tag, 0.0, float(size)))
                if w.last_use.get(cmd.src, 0.0) < end:
                    w.last_use[cmd.src] = end
                if cmd.inplace and cmd.src in w.storage_of:
                    storage = w.storage_of[cmd.src]
                    if cmd.out != cmd.src:
                        w.bind(cmd.out, storage, out_meta)
                    w.ready[cmd.src] = end
                else:
                    storage = w.allocate(issued[w.rank], cmd.stream, out_bytes)
                    w.bind(cmd.out, storage, out_meta)
                w.ready[cmd.out] = end
                self._finish(w, cmd.stream, end)

    def _send(self, cmd: SendTensor, tag: Any) -> None:
        allowed = None if cmd.ranks is None else set(cmd.ranks)
        meta = cmd.meta.outputs[0] if cmd.meta.outputs else (
            cmd.meta.inputs[0] if cmd.meta.inputs else None)
        size = nbytes(meta) if meta is not None else 0
        issued: dict[int, float] = {}

        def issue(w: WorkerModel) -> float:
            if w.rank not in issued:
                issued[w.rank] = self._issue(w)
            return issued[w.rank]

        for src, dst in cmd.pairs:
            if allowed is not None and (src not in allowed and dst not in allowed):
                continue
            ws, wd = self.workers[src], self.workers[dst]
            start = max(issue(ws), ws.stream_free(cmd.stream), ws.inputs_ready((cmd.src,)))
            start = max(start, issue(wd), wd.stream_free(cmd.stream))
            if src == dst:
                duration = self.profile.op_overhead + 2 * size / self.profile.memory_bandwidth
                name = "copy"
            else:
                duration = self.profile.op_overhead + self.comm.p2p_time(size, src, dst)
                name = f"send {src}->{dst}"
            end = start + duration
            for w in {src: ws, dst: wd}.values():
                w.tasks.append(Task(w.rank, cmd.stream, name, start, end, cmd.seq,
                                    "transfer", tag, 0.0, float(size)))
                self._finish(w, cmd.stream, end)
            if ws.last_use.get(cmd.src, 0.0) < end:
                ws.last_use[cmd.src] = end
            storage = wd.allocate(issued[dst], cmd.stream, size)
            wd.bind(cmd.out, storage, meta)
            wd.ready[cmd.out] = end

    def _borrow(self, w: WorkerModel, cmd: Borrow) -> None:
        self._issue(w)
        if cmd.drop:
            ready = w.ready.get(cmd.out, 0.0)
            used = w.last_use.get(cmd.out, 0.0)
            if cmd.mutable and ready > w.ready.get(cmd.src, 0.0):
                w.ready[cmd.src] = ready
            if used > w.last_use.get(cmd.src, 0.0):
                w.last_use[cmd.src] = used
            w.forget(cmd.out)
            return
        storage = w.storage_of.get(cmd.src)
        ready = w.ready.get(cmd.src, 0.0)
        if cmd.mutable:  # exclusive: wait for every reader on the lending stream
            ready = max(ready, w.last_use.get(cmd.src, 0.0))
        if storage is not None:
            w.bind(cmd.out, storage, w.meta_of.get(cmd.src))
        w.ready[cmd.out] = ready

    # ---- iterations ----------------------------------------------------------------------
    def reset_window(self) -> int:
        """The peak bytes (largest worker) since the last call, then start a new window."""
        peak = max(w.window_peak for w in self.workers)
        for w in self.workers:
            w.window_peak = w.live
        return peak


class _Shapes:
    """Value id -> shape, read lazily from a worker's metadata (no copy per command)."""

    __slots__ = ("_metas",)

    def __init__(self, metas: dict[int, TensorMeta]) -> None:
        self._metas = metas

    def get(self, ident: int, default: Any = None) -> Any:
        meta = self._metas.get(ident)
        return default if meta is None else meta.shape


def _all_cpu(meta: Any) -> bool:
    """True when every input and output tensor of the operator is on the CPU."""
    tensors = (*meta.inputs, *meta.outputs)
    return bool(tensors) and all(str(m.device).startswith("cpu") for m in tensors)


def _arg(args: Any, kwargs: Any, where: tuple[int, str] | None) -> int | None:
    """The value id passed at schema argument `where` (position, name), if it is a Ref."""
    if where is None:
        return None
    pos, name = where
    value = None
    if isinstance(args, (list, tuple)) and pos < len(args):
        value = args[pos]
    elif isinstance(kwargs, dict) and name in kwargs:
        value = kwargs[name]
    return value.id if type(value) is Ref else None
