"""torchmonarch's `monarch._src.actor.logging`: each proc mesh's log client, and flushing them.

On Monarch a proc mesh's `_logging_manager` holds a `LoggingMeshClient`, a Rust actor spawned
next to the mesh that forwards the procs' output and aggregates repeated lines. Here the host
agent that runs the procs forwards their output (`hosts/proc_logs.py`), so the client of a mesh
is a view of that forwarding: `set_mode` sets the mesh's options (`ProcMesh.logging_option`'s
rules: pending lines are written under the old options first), `flush` returns a task that
completes once every line the procs wrote so far is out. `LoggingManager` keeps Monarch's
shape around it: a client made by `init` (or at once for an owned mesh), `flush()` bounded by
a few seconds and never raising, `flush_async()` for an asyncio loop, and in IPython a flush
after every cell.

`flush_all_proc_mesh_logs()` flushes every proc mesh this process spawned and has not stopped.
`_pending_flush_tasks` is the set of asyncio tasks Monarch's flushes run as; here flushes are
tasks on the pytokio loop, so it stays empty, and awaiting what it holds is a no-op.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from monarch._src.mesh import hooks
from monarch._src.mesh.context import binding_instance, context
from monarch._src.mesh.native import NativeMesh
from monarch._src.mesh.proc_mesh import (
    ProcMesh,
    active_proc_meshes,
    apply_log_mode,
    check_log_mode,
    flush_proc_logs,
    log_manager_of,
)
from monarch._src.runtime.pytokio import PythonTask, Shared

__all__ = ["LoggingManager", "LoggingMeshClient", "flush_all_proc_mesh_logs", "manager_of"]

logger = logging.getLogger(__name__)

# Monarch's default aggregation window, set when a mesh's client starts streaming.
DEFAULT_AGGREGATE_WINDOW_SEC = 3
# How long `LoggingManager.flush()` waits before giving up (it never raises).
FLUSH_TIMEOUT_SEC = 3

IN_IPYTHON = "IPython" in sys.modules and sys.modules["IPython"].get_ipython() is not None
_global_flush_registered = False  # the post_run_cell flush is registered once per process

_pending_flush_tasks: set[asyncio.Task[None]] = set()


class LoggingMeshClient:
    """The log client of one proc mesh: the host agent's forwarding of its procs' output."""

    def __init__(self, proc_mesh: ProcMesh) -> None:
        self._mesh = proc_mesh
        # The last option change, which flushes wait for: options apply in call order.
        self._mode: Shared[None] | None = None

    @classmethod
    async def spawn(cls, instance: Any, proc_mesh: ProcMesh | NativeMesh) -> LoggingMeshClient:
        """The client of `proc_mesh` (the mesh, or what its `_proc_mesh` resolves to)."""
        mesh = proc_mesh.mesh if isinstance(proc_mesh, NativeMesh) else proc_mesh
        if not isinstance(mesh, ProcMesh):
            raise TypeError(
                "LoggingMeshClient.spawn takes a proc mesh (or what its _proc_mesh resolves "
                f"to), got {type(proc_mesh).__name__}."
            )
        return cls(mesh)

    def set_mode(self, instance: Any, *, stream_to_client: bool,
                 aggregate_window_sec: int | float | None, level: int) -> None:
        """Set the mesh's options once its procs are up; returns at once."""
        # ProcMesh.logging_option, which calls this, warned already if forwarding is off.
        check_log_mode(self._mesh, stream_to_client, aggregate_window_sec, level, warn=False)
        before = self._mode

        async def apply() -> None:
            if before is not None:
                await before
            await apply_log_mode(self._mesh, stream_to_client, aggregate_window_sec, level)

        self._mode = PythonTask.from_coroutine(apply()).spawn()

    async def settled(self) -> None:
        """Wait until the options set so far apply (their failure raised here)."""
        if self._mode is not None:
            await self._mode

    def flush(self, instance: Any) -> PythonTask[None]:
        """A task completing once every line the procs wrote so far was written here (after
        the option changes made before it)."""
        mode = self._mode

        async def flushed() -> None:
            if mode is not None:
                await mode
            await asyncio.wrap_future(flush_proc_logs(self._mesh))

        return PythonTask.from_coroutine(flushed())


class LoggingManager:
    """torchmonarch's per-proc-mesh log manager; `_logging_mesh_client` is None until `init`."""

    def __init__(self) -> None:
        self._logging_mesh_client: LoggingMeshClient | None = None

    async def init(self, proc_mesh: Any, stream_to_client: bool) -> None:
        """Make the mesh's client and set its initial options (no-op once made)."""
        if self._logging_mesh_client is not None:
            return
        instance = binding_instance(context().actor_instance)
        client = await LoggingMeshClient.spawn(instance, proc_mesh)
        client.set_mode(instance, stream_to_client=stream_to_client,
                        aggregate_window_sec=DEFAULT_AGGREGATE_WINDOW_SEC, level=logging.INFO)
        self._logging_mesh_client = client
        self.register_flusher_if_in_ipython()
        self.enable_fd_capture_if_in_ipython()

    async def logging_option(self, stream_to_client: bool = True,
                             aggregate_window_sec: int | float | None = 3,
                             level: int = logging.INFO) -> None:
        """`ProcMesh.logging_option` through this manager's client."""
        if self._logging_mesh_client is None:
            raise RuntimeError(
                "This LoggingManager has no log client: the proc mesh's owner sets its options "
                "(call logging_option on the mesh spawn_procs returned)."
            )
        client = self._logging_mesh_client
        client.set_mode(
            binding_instance(context().actor_instance),
            stream_to_client=stream_to_client,
            aggregate_window_sec=aggregate_window_sec,
            level=level,
        )
        self.register_flusher_if_in_ipython()
        self.enable_fd_capture_if_in_ipython()
        if isinstance(client, LoggingMeshClient):
            # Ours applies the options in the background: once this returns they hold, so
            # what the procs print next is streamed (or not) as asked.
            await client.settled()

    def register_flusher_if_in_ipython(self) -> None:
        """In IPython, flush every proc mesh's output after each cell (registered once)."""
        global _global_flush_registered
        if not IN_IPYTHON or _global_flush_registered:
            return
        from IPython import get_ipython

        ipython = get_ipython()
        if ipython is None:
            return

        def flush_after_cell(*_: Any) -> None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                flush_all_proc_mesh_logs()
            else:  # a cell run by an event loop: flush without blocking it
                task = loop.create_task(_flush_all_proc_mesh_logs_async())
                _pending_flush_tasks.add(task)
                task.add_done_callback(_pending_flush_tasks.discard)

        ipython.events.register("post_run_cell", flush_after_cell)
        _global_flush_registered = True

    def enable_fd_capture_if_in_ipython(self) -> None:
        """Monarch captures the kernel's file descriptors here; a kernel already shows what the
        procs forward (the notebook's own output capture), so there is nothing to enable."""
        return None

    def _new_flush_task(self) -> PythonTask[None]:
        client = self._logging_mesh_client
        if client is None:
            async def nothing() -> None:
                return None

            return PythonTask.from_coroutine(nothing())
        return client.flush(binding_instance(context().actor_instance))

    def flush(self) -> None:
        """Flush the mesh's forwarded output, waiting at most a few seconds; never raises."""
        if self._logging_mesh_client is None:
            return
        try:
            self._new_flush_task().spawn_handle().get(timeout=FLUSH_TIMEOUT_SEC)
        except Exception as exc:  # a flush is best effort: the lines still come, later
            logger.warning("failed to flush the logs of a proc mesh: %s", exc)

    async def flush_async(self) -> None:
        """`flush()` for an asyncio loop: awaits the flush without blocking the loop."""
        if self._logging_mesh_client is None:
            return
        try:
            await self._new_flush_task().spawn_handle()
        except Exception as exc:  # best effort, as flush()
            logger.warning("failed to flush the logs of a proc mesh: %s", exc)

    async def _flush_from_tokio(self) -> None:
        """The flush run from a task on the pytokio loop (a host mesh's shutdown)."""
        if self._logging_mesh_client is None:
            return
        try:
            await self._new_flush_task().spawn()
        except Exception as exc:  # best effort, as flush()
            logger.warning("failed to flush the logs of a proc mesh: %s", exc)


def manager_of(proc_mesh: ProcMesh) -> LoggingManager:
    """The manager `ProcMesh._logging_manager` makes: with a client for the mesh this process
    spawned (nothing to spawn here), without one for a slice or a reference."""
    manager = LoggingManager()
    if any(pm is proc_mesh for pm in active_proc_meshes()):
        manager._logging_mesh_client = LoggingMeshClient(proc_mesh)
    return manager


def flush_all_proc_mesh_logs() -> None:
    """Flush the forwarded output of every proc mesh this process spawned and has not stopped."""
    from monarch._src.actor import proc_mesh

    for pm in proc_mesh.get_active_proc_meshes():
        log_manager_of(pm).flush()


async def _flush_all_proc_mesh_logs_async() -> None:
    from monarch._src.actor import proc_mesh

    for pm in proc_mesh.get_active_proc_meshes():
        await log_manager_of(pm).flush_async()


hooks.logging_manager.install(manager_of)
