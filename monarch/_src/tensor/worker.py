"""Worker side: the `TensorWorker` actor that executes the command stream on one proc.

One worker per proc per engine, spawned lazily by the controller on every proc of the mesh.
It holds values by id, runs commands strictly in arrival order on its actor thread, and never
fails on a user error: a command that raises poisons its outputs (a `WorkerError`), and every
later command reading a poisoned id poisons its own outputs with the same error. Fetches
answer with the value or the error.

Distributed tensors passed to an actor endpoint reach the actor through a hand-over table in
this process: at the call's place in the stream (an `ActorCall` or `CallActor` command) the
worker puts its values there under the call's token, the actor's unpickling takes them
(`shard_value`), and the worker waits for the actor's reply before going on, so the endpoint
sees every earlier operation and later operations see what it did.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from monarch._src.lowlevel import PortEntry
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import current_rank
from monarch._src.tensor.commands import (
    ActorCall,
    Borrow,
    CallActor,
    CallOp,
    CallRemote,
    Delete,
    Reduce,
    Ref,
    SendTensor,
)
from monarch._src.tensor.errors import WorkerError
from monarch._src.tensor.groups import GroupCache

__all__ = ["TensorWorker", "WorkerState", "shard_value"]

# Engine id -> the state of this proc's worker for that engine.
_states: dict[str, WorkerState] = {}
_states_lock = threading.Lock()

# Freed CPU buffers of at least this many bytes are kept for reuse, up to _POOL_MAX in all.
_POOL_MIN = 1 << 20
_POOL_MAX = 256 << 20

# The state whose commands this proc is executing now (for remote functions that ask).
_current: WorkerState | None = None

_ops: dict[str, Any] = {}  # qualified op name -> OpOverload
_fns: dict[str, Callable[..., Any]] = {}  # dotted path -> function
_pickled: dict[bytes, Callable[..., Any]] = {}  # pickled function -> function


# The hand-over table: (engine id, call token) -> this proc's values of the distributed tensors
# in an endpoint call's arguments (a list), or the WorkerError of a poisoned one. The worker
# fills it at the call's place in the stream; the actor's unpickling reads it.
_handover: dict[tuple[str, int], Any] = {}
_handover_cond = threading.Condition()


def _publish(engine_id: str, token: int, values: Any) -> None:
    with _handover_cond:
        _handover[(engine_id, token)] = values
        _handover_cond.notify_all()


def _withdraw(engine_id: str, token: int) -> None:
    with _handover_cond:
        _handover.pop((engine_id, token), None)


def shard_value(engine_id: str, token: int, index: int) -> Any:
    """This proc's value of the `index`-th distributed tensor in the arguments of call `token`
    (what an actor's endpoint receives in place of the distributed tensor).

    Waits until this proc's worker reaches the call in its stream (bounded by the tensor-engine
    timeout); raises `RemoteException` when the tensor failed to compute.
    """
    from monarch._src.config import get as config_get
    from monarch._src.config.duration import parse_duration_seconds

    key = (engine_id, token)
    timeout = parse_duration_seconds(str(config_get("tensor_engine_timeout")))
    with _handover_cond:
        if not _handover_cond.wait_for(lambda: key in _handover, timeout=timeout):
            raise TimeoutError(
                f"The tensor-engine worker on this proc did not reach this call within {timeout} "
                "s, so the distributed tensors among its arguments have no value here; an "
                "earlier operation (a collective?) may be stuck."
            )
        values = _handover[key]
    if isinstance(values, WorkerError):
        from monarch._src.tensor.errors import RemoteException

        raise RemoteException(values.rank, values.text, "")
    return values[index]


class _LateRemoteException:
    """Pickles as the controller-side `RemoteException` of a worker error: unpickled at the
    controller, it finds the engine there and adds the controller traceback of command `seq`."""

    def __init__(self, engine_id: str, error: WorkerError) -> None:
        self.engine_id = engine_id
        self.error = error

    def __reduce__(self) -> Any:
        return (_remote_exception, (self.engine_id, self.error))


def _remote_exception(engine_id: str, error: WorkerError) -> Any:
    from monarch._src.tensor.engine import engine_by_id
    from monarch._src.tensor.errors import RemoteException

    engine = engine_by_id(engine_id)
    if engine is None:
        return RemoteException(error.rank, error.text, "")
    return engine.remote_exception(error)


def resolve_op(name: str) -> Any:
    """The torch operator named like "aten::add.Tensor"."""
    op = _ops.get(name)
    if op is None:
        import torch

        ns, _, rest = name.partition("::")
        opname, _, overload = rest.partition(".")
        op = _ops[name] = getattr(getattr(getattr(torch.ops, ns), opname), overload or "default")
    return op


def resolve_function(fn: Any) -> Callable[..., Any]:
    """A callable given as itself or as a dotted path "package.module.function"."""
    if not isinstance(fn, str):
        data = getattr(fn, "data", None)
        if isinstance(data, bytes):  # a PickledFunction: unpickle once per distinct function
            found = _pickled.get(data)
            if found is None:
                import cloudpickle  # type: ignore[import-untyped]  # ships no type information

                found = _pickled[data] = cloudpickle.loads(data)
            return found
        return fn  # type: ignore[no-any-return]
    found = _fns.get(fn)
    if found is None:
        module, _, attr = fn.rpartition(".")
        if not module:
            raise ValueError(f"remote function path {fn!r} must be 'module.function'.")
        found = getattr(importlib.import_module(module), attr)
        # `@remote` replaced the module's function by its `Remote` wrapper: run the function.
        wrapped = getattr(found, "_monarch_remote_target", None)
        if wrapped is not None:
            target = wrapped()
            if target == fn:
                raise ValueError(
                    f"remote function path {fn!r} names the remote wrapper itself; point it at "
                    "the plain function instead."
                )
            found = resolve_function(target)
        _fns[fn] = found
    return found


class RrefPort(PortEntry):
    """Port-table entry collecting actor replies (for `rref` calls, or for endpoint calls with
    distributed tensors among their arguments), consumed in order."""

    closed = False  # never closes: it serves every such call of the engine

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._replies: list[Any] = []  # raw (status, payload) replies not yet consumed
        self._skip = 0  # replies still to come for calls that timed out: dropped on arrival

    def deliver(self, payload: Any, rank: int | None, status: int) -> None:
        with self._cond:
            if self._skip:
                self._skip -= 1
                return
            self._replies.append((status, payload))
            self._cond.notify_all()

    def abandon(self) -> None:
        """The reply awaited last never came in time: drop it when it does come."""
        with self._cond:
            self._skip += 1

    def fail(self, exc: BaseException) -> None:
        from monarch._src.lowlevel import PORT_ERROR, encode

        self.deliver(encode(exc), None, PORT_ERROR)

    def next(self, timeout: float, what: str) -> Any:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._replies), timeout=timeout):
                raise TimeoutError(f"The actor did not answer the rref call {what} in {timeout} s.")
            return self._replies.pop(0)


class _Poisoned(Exception):
    """An input of a command is poisoned; carries the original error."""

    def __init__(self, error: WorkerError) -> None:
        self.error = error


class WorkerState:
    """Values, poison and progress of one engine's worker on this proc."""

    def __init__(self, engine_id: str, rank: int, world: int, store: tuple[str, int],
                 timeout: float) -> None:
        self.engine_id = engine_id
        self.rank = rank  # engine rank of this proc
        self.world = world  # procs in the engine
        self.values: dict[int, Any] = {}  # id -> value (tensor or any object)
        self.poisoned: dict[int, WorkerError] = {}  # id -> why it has no value
        self.groups = GroupCache(engine_id, rank, store, timeout)
        self.executed = 0  # sequence number of the last batch fully executed
        self.cond = threading.Condition()  # notified when `executed` grows
        self.timeout = timeout
        self.pool: dict[tuple[int, Any], list[Any]] = {}  # (numel, dtype) -> freed buffers
        self.pool_bytes = 0  # bytes held in `pool`, at most _POOL_MAX
        self.rref_entry = RrefPort()  # actor results for CallActor commands, in order
        self.relay_entry = RrefPort()  # actor replies for ActorCall commands, in order
        self.ports: Any = None  # (rref, relay) port addresses once opened

    # ---- reading values -----------------------------------------------------------------
    def get(self, ident: int) -> Any:
        """The value `ident`; raises `_Poisoned` if it failed or is not on this rank."""
        if ident in self.poisoned:
            raise _Poisoned(self.poisoned[ident])
        try:
            return self.values[ident]
        except KeyError:
            raise _Poisoned(WorkerError(-1, self.rank, (
                f"Tensor {ident} has no value on rank {self.rank}: it lives on other ranks of "
                f"the mesh, or it was deleted. Move it with to_mesh() first.\n"
            ))) from None

    def resolve(self, tree: Any) -> Any:
        """`tree` with every `Ref` replaced by its value."""
        import torch.utils._pytree as pytree

        return pytree.tree_map(
            lambda x: self.get(x.id) if type(x) is Ref else x, tree,
            is_leaf=lambda x: type(x) is Ref,
        )

    # ---- executing ----------------------------------------------------------------------
    def run(self, commands: list[Any]) -> None:
        """Execute `commands` in order; a failing command poisons its outputs only."""
        global _current
        _current = self
        rank = self.rank
        for cmd in commands:
            if type(cmd) is Delete:
                # Forget all first and drop views: a buffer is reusable once its views are gone.
                freed = [self.values.pop(i, None) for i in cmd.ids]
                for i in cmd.ids:
                    self.poisoned.pop(i, None)
                bases = [v for v in freed if getattr(v, "_base", True) is None]
                del freed
                while bases:
                    value = bases.pop()
                    self._recycle(value)
                    del value
                continue
            if cmd.ranks is not None and rank not in cmd.ranks:
                continue
            try:
                self._execute(cmd)
            except _Poisoned as p:
                self._poison(cmd, p.error)
            except Exception:  # noqa: BLE001 - a user error poisons; it never kills the worker
                self._poison(cmd, WorkerError(cmd.seq, rank, traceback.format_exc()))

    # ---- a pool of large freed buffers ----------------------------------------------------
    # Fresh large CPU allocations page-fault on first touch (often 10x the cost of the copy
    # itself); collectives that need an output buffer reuse freed ones instead.
    def _recycle(self, value: Any) -> None:
        import torch

        if (
            type(value) is torch.Tensor
            and value.device.type == "cpu"
            and value._base is None
            and value.storage_offset() == 0
            and value.is_contiguous()
        ):
            nbytes = value.numel() * value.element_size()
            if (
                _POOL_MIN <= nbytes <= _POOL_MAX - self.pool_bytes
                and sys.getrefcount(value) <= 3
                and torch._C._storage_Use_Count(value.untyped_storage()._cdata) <= 2
                and value.untyped_storage().nbytes() == nbytes
            ):
                self.pool.setdefault((value.numel(), value.dtype), []).append(value)
                self.pool_bytes += nbytes

    def take_buffer(self, like: Any) -> Any:
        """An uninitialised contiguous tensor shaped like `like`, from the pool if possible."""
        import torch

        if like.device.type == "cpu":
            free = self.pool.get((like.numel(), like.dtype))
            if free:
                buf = free.pop()
                self.pool_bytes -= buf.numel() * buf.element_size()
                return buf.view(like.shape)
        return torch.empty(like.shape, dtype=like.dtype, device=like.device)

    def _poison(self, cmd: Any, error: WorkerError) -> None:
        outs = cmd.outputs if hasattr(cmd, "outputs") else (cmd.out,)
        for i in outs:
            if i is not None:
                self.values.pop(i, None)
                self.poisoned[i] = error

    def _store(self, outputs: tuple[int | None, ...], result: Any) -> None:
        import torch
        import torch.utils._pytree as pytree

        leaves = [x for x in pytree.tree_leaves(result) if isinstance(x, torch.Tensor)]
        if len(leaves) != len(outputs):
            raise RuntimeError(
                f"The operation returned {len(leaves)} tensors but the controller expected "
                f"{len(outputs)} (from its propagator); make the propagator match the function."
            )
        for ident, value in zip(outputs, leaves):
            if ident is not None:
                self.values[ident] = value
                self.poisoned.pop(ident, None)

    def _execute(self, cmd: Any) -> None:
        kind = type(cmd)
        if kind is CallOp:
            op = resolve_op(cmd.op)
            result = op(*self.resolve(cmd.args), **self.resolve(cmd.kwargs))
            self._store(cmd.outputs, result)
        elif kind is CallRemote:
            fn = resolve_function(cmd.fn)
            result = fn(*self.resolve(cmd.args), **self.resolve(cmd.kwargs))
            if len(cmd.outputs) == 1 and not _is_tensor(result) and cmd.outputs[0] is not None \
                    and cmd.meta.outputs == ():
                self.values[cmd.outputs[0]] = result  # an opaque object (OpaqueRef)
            else:
                self._store(cmd.outputs, result)
        elif kind is Reduce:
            from monarch._src.tensor.collective_exec import run_reduce

            self.values[cmd.out] = run_reduce(self, cmd)
            self.poisoned.pop(cmd.out, None)
        elif kind is SendTensor:
            from monarch._src.tensor.collective_exec import run_send

            run_send(self, cmd)
        elif kind is Borrow:
            if cmd.drop:
                self.values.pop(cmd.out, None)
                self.poisoned.pop(cmd.out, None)
            else:
                self.values[cmd.out] = self.get(cmd.src)
        elif kind is CallActor:
            self._call_actor(cmd)
        elif kind is ActorCall:
            self._relay_actor_call(cmd)
        else:
            raise TypeError(f"Unknown tensor-engine command {kind.__name__}.")

    def _call_actor(self, cmd: CallActor) -> None:
        from monarch._src.lowlevel import decode_reply

        # The controller sent the call straight to the actor (keeping FIFO with its other
        # calls) with this worker's port as the reply address; results arrive in call order.
        if cmd.token:
            self._hand_over(cmd.token, cmd.shards)
        try:
            raw = self.rref_entry.next(self.timeout, cmd.method)
        finally:
            if cmd.token:
                _withdraw(self.engine_id, cmd.token)
        self._store(cmd.outputs, decode_reply(raw))

    def _hand_over(self, token: int, shards: tuple[int, ...]) -> WorkerError | None:
        """Publish this rank's values of `shards` for the actor of call `token` (or the error
        of the first poisoned one, which the actor's unpickling raises)."""
        try:
            values: Any = [self.get(i) for i in shards]
        except _Poisoned as p:
            values = p.error
        _publish(self.engine_id, token, values)
        return values if isinstance(values, WorkerError) else None

    def _relay_actor_call(self, cmd: ActorCall) -> None:
        """Hand the tensors over, wait for the actor's reply, forward it to the caller.

        The stream waits while the endpoint runs (so later operations see what it did to its
        arguments). An endpoint's exception and a poisoned argument both reach the caller as a
        `RemoteException`; a broadcast's reply is dropped.
        """
        from monarch._src.lowlevel import PORT, PORT_ERROR, PortMsg, decode, encode, get_runtime
        from monarch._src.supervision.errors import ActorError

        poisoned = self._hand_over(cmd.token, cmd.shards)
        try:
            raw: Any = self.relay_entry.next(self.timeout, cmd.method)
        except TimeoutError as exc:
            self.relay_entry.abandon()
            raw = (PORT_ERROR, encode(exc))
        finally:
            _withdraw(self.engine_id, cmd.token)
        if cmd.reply is None:
            return
        status, payload = raw
        error: Any = None
        if poisoned is not None:
            error = _LateRemoteException(self.engine_id, poisoned)
        elif status == PORT_ERROR:
            try:
                failure = decode(payload)
            except Exception as bad:  # noqa: BLE001 - forwarded as the error it is
                failure = bad
            if isinstance(failure, (ActorError, TimeoutError)):
                error = _LateRemoteException(
                    self.engine_id, WorkerError(cmd.seq, self.rank, str(failure))
                )
        if error is not None:
            status, payload = PORT_ERROR, encode(error)
        rank = cmd.cast_ranks[self.rank]
        get_runtime().mailbox.post_all(
            [(cmd.reply[0], PortMsg(PORT, cmd.reply[1], payload, rank, status))], payload
        )

    def fetch(self, tree: Any) -> tuple[bool, Any]:
        """(True, tree with values copied) or (False, the WorkerError of a poisoned input)."""
        import torch
        import torch.utils._pytree as pytree

        try:
            value = self.resolve(tree)
        except _Poisoned as p:
            return False, p.error

        def to_cpu(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return x.detach().to("cpu", copy=True)
            return x

        return True, pytree.tree_map(to_cpu, value)


def _is_tensor(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def fail_with(text: str) -> None:
    """Raise `text` on the worker (stands in for a command that could not be sent)."""
    raise RuntimeError(text)


def current_state() -> WorkerState:
    """The worker state running the current command (inside remote functions)."""
    if _current is None:
        raise RuntimeError("No tensor-engine worker is running a command in this process.")
    return _current


def _guard_set_device(local_rank: int) -> None:
    """Make `torch.cuda.set_device` to a device this proc cannot see fail clearly."""
    import torch

    original = torch.cuda.set_device
    if getattr(original, "_monarch_guard", False):
        return

    def set_device(device: Any) -> None:
        index = device if isinstance(device, int) else getattr(torch.device(device), "index", 0)
        visible = torch.cuda.device_count()
        if index is not None and index >= visible:
            raise RuntimeError(
                f"torch.cuda.set_device({device!r}): only {visible} CUDA devices are available "
                f"to monarch worker {local_rank} (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES')}); each worker sees its own GPU as "
                "device 0."
            )
        original(device)

    set_device._monarch_guard = True  # type: ignore[attr-defined]
    torch.cuda.set_device = set_device


def _set_worker_env(rank: int, world: int, labels: tuple[str, ...], coords: tuple[int, ...],
                    sizes: tuple[int, ...]) -> None:
    local_rank, local_world = 0, 1
    for dim in ("gpus", "gpu"):
        if dim in labels:
            i = labels.index(dim)
            local_rank, local_world = coords[i], sizes[i]
            os.environ["CUDA_VISIBLE_DEVICES"] = str(local_rank)
            _guard_set_device(local_rank)
            break
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world)
    os.environ["LOCAL_RANK"] = str(local_rank)
    os.environ["LOCAL_WORLD_SIZE"] = str(local_world)
    os.environ["NCCL_HOSTID"] = os.uname().nodename


class TensorWorker(Actor):
    """Executes one engine's command stream on this proc (see the module docstring)."""

    def __init__(self, engine_id: str, store: tuple[str, int], timeout: float, seed: int,
                 set_env: bool) -> None:
        point = current_rank()
        labels = tuple(point.extent.labels)
        sizes = tuple(point.extent.sizes)
        coords = tuple(point[label] for label in labels)
        rank, world = point.rank, point.extent.nelements
        # Only in procs monarch started: the controller's own process (this_proc()) keeps its
        # environment and random state.
        if os.environ.get("MONARCH_PROC") == "1":
            if set_env:
                _set_worker_env(rank, world, labels, coords, sizes)
            import torch

            torch.manual_seed(seed + rank)  # distinct per proc: forked procs share RNG state
            if "OMP_NUM_THREADS" not in os.environ:
                # Like torchrun: procs sharing a machine split its cores; oversubscribed
                # intra-op threads make every op (a 16 MiB copy: 6x) slower.
                torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, world)))
        self.state = WorkerState(engine_id, rank, world, store, timeout)
        with _states_lock:
            _states[engine_id] = self.state

    @endpoint
    def run(self, seq: int, commands: list[Any]) -> None:
        """Execute one batch of commands in order; never raises for a user error."""
        state = self.state
        try:
            state.run(commands)
        finally:
            with state.cond:
                state.executed = seq
                state.cond.notify_all()

    @endpoint
    def fetch(self, tree: Any) -> tuple[bool, Any]:
        """The values named in `tree` (a pytree with `Ref`s), copied to CPU, or the error."""
        return self.state.fetch(tree)

    @endpoint
    def run_function(self, fn: Any, args: Any, kwargs: Any) -> tuple[bool, Any]:
        """Run `fn` on this proc's values and return its result (or the poison error)."""
        global _current
        state = self.state
        _current = state
        try:
            a, k = state.resolve(args), state.resolve(kwargs)
        except _Poisoned as p:
            return False, p.error
        try:
            return True, resolve_function(fn)(*a, **k)
        except Exception:  # noqa: BLE001 - reported to the caller as a RemoteException
            return False, WorkerError(-1, state.rank, traceback.format_exc())

    @endpoint
    def send_function(self, fn: Any, args: Any, kwargs: Any) -> Any:
        """`run_function` for `send(remote_fn, ..., port=port)`: the port gets the plain result,
        as from an actor's endpoint, and a failure is this endpoint's (the port's) error."""
        global _current
        state = self.state
        _current = state
        try:
            a, k = state.resolve(args), state.resolve(kwargs)
        except _Poisoned as p:
            raise RuntimeError(
                f"An argument of remote function {fn!r} failed earlier on rank {state.rank}:\n"
                f"{p.error.text}") from None
        return resolve_function(fn)(*a, **k)

    @endpoint
    def reply_ports(self) -> Any:
        """The addresses of this worker's ports for actor replies: (`rref` results, replies
        of endpoint calls with distributed tensors among their arguments)."""
        state = self.state
        if state.ports is None:
            from monarch._src.lowlevel import get_runtime

            mailbox = get_runtime().mailbox
            state.ports = (mailbox.open_port(state.rref_entry),
                           mailbox.open_port(state.relay_entry))
        return state.ports

    @endpoint
    def exit(self) -> None:
        """Forget every value and group of this engine."""
        self.state.values.clear()
        self.state.poisoned.clear()
        self.state.groups.close()
        with _states_lock:
            _states.pop(self.state.engine_id, None)
