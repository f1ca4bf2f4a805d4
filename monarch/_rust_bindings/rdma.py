"""torchmonarch's `monarch._rust_bindings.rdma`: the layer under `monarch._src.rdma.rdma`.

On Monarch this is the Rust extension that registers memory, runs transfers and starts the
per-proc RDMA managers; `monarch._src.rdma.rdma` is the Python API over it. Here the work is
done by `monarch._src.rdma` (`memory`, `buffer`, `readiness`); this module gives it Monarch's
names and the calling convention of its bindings: buffer creation, submission and drop take
the caller's actor instance and the observe-only `Handle` of its proc mesh's manager start
(`_RdmaManager.ensure_init_rdma_manager_nonblocking`), and wait for that handle before
doing anything.
"""

from __future__ import annotations

import asyncio
from typing import Any

from monarch._rust_bindings.monarch_hyperactor.handle import Handle
from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask, Shared
from monarch._src.lowlevel import Future
from monarch._src.mesh.native import NativeMesh
from monarch._src.mesh.proc_mesh import ProcMesh
from monarch._src.rdma.backend import is_ibverbs_available
from monarch._src.rdma.buffer import RdmaAction, RdmaBuffer, Ready, check_timeout
from monarch._src.rdma.errors import RdmaInitError
from monarch._src.rdma.memory import (
    LocalMemoryHandle as _LocalMemoryHandle,
    WeakLocalMemoryHandle as _WeakLocalMemoryHandle,
    assert_1d_contiguous as _assert_1d_contiguous,
    handle_from_memoryview as _make_local_memory_handle_from_memoryview,
    handle_from_tensor as _make_local_memory_handle_from_tensor,
    memoryview_addr_and_size as _get_memoryview_addr_and_size,
    tensor_addr_and_size as _get_tensor_addr_and_size,
)
from monarch._src.rdma.readiness import init_mesh

__all__ = [
    "RdmaInitError",
    "_LocalMemoryHandle",
    "_RdmaAction",
    "_RdmaBuffer",
    "_RdmaManager",
    "_WeakLocalMemoryHandle",
    "_assert_1d_contiguous",
    "_get_memoryview_addr_and_size",
    "_get_tensor_addr_and_size",
    "_make_local_memory_handle_from_memoryview",
    "_make_local_memory_handle_from_tensor",
    "is_ibverbs_available",
    "rdma_supported",
]


def rdma_supported() -> bool:
    """Whether buffers can move here at all: always (same-host copies and the TCP plane need no
    hardware; whether the TCP fallback is allowed is `get_rdma_backend()`'s question)."""
    return True


def _ready(handle: Any) -> Ready:
    """The future a readiness `Handle` observes (None: nothing to wait for)."""
    if handle is None:
        return None
    if not isinstance(handle, Handle):
        raise TypeError(
            f"rdma_manager_init must be the Handle of _RdmaManager."
            f"ensure_init_rdma_manager_nonblocking(), not {type(handle).__name__}."
        )
    return handle.concurrent_future()


def _actor_id(client: Any) -> str:
    actor_id = getattr(client, "actor_id", None)
    if actor_id is None:
        raise TypeError(
            f"client must be the calling actor's instance (context().actor_instance), not "
            f"{type(client).__name__}."
        )
    return str(actor_id)


class _RdmaManager:
    """Starting the RDMA managers of a proc mesh."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "_RdmaManager has no instances; call "
            "_RdmaManager.ensure_init_rdma_manager_nonblocking(shared, instance)."
        )

    @staticmethod
    def ensure_init_rdma_manager_nonblocking(shared: Shared[Any], instance: Any) -> Handle[None]:
        """Start the managers of every proc of the mesh `shared` resolves to, at once; the
        `Handle` resolves to None when all are up, or fails with `RdmaInitError` (bad settings,
        no backend), `TypeError` (not a proc mesh), `SupervisionError` or `TimeoutError`."""
        _actor_id(instance)

        async def start() -> None:
            mesh = await shared
            if isinstance(mesh, NativeMesh):  # what ProcMesh._proc_mesh resolves to
                mesh = mesh.mesh
            if not isinstance(mesh, ProcMesh):
                raise TypeError(
                    f"ensure_init_rdma_manager_nonblocking needs a Shared that resolves to a "
                    f"ProcMesh, but it resolved to {type(mesh).__name__}."
                )
            await asyncio.wrap_future(init_mesh(mesh))

        return PythonTask.from_coroutine(start()).spawn_handle()


class _RdmaBuffer:
    """A registered buffer (`buffer.RdmaBuffer`) under Monarch's binding calls."""

    __slots__ = ("_core",)

    def __init__(self, core: RdmaBuffer) -> None:
        if not isinstance(core, RdmaBuffer):
            raise TypeError(
                "_RdmaBuffer wraps a registered buffer; make one with "
                "_RdmaBuffer.create_rdma_buffer_blocking(local=..., client=..., "
                "rdma_manager_init=...)."
            )
        self._core = core

    @classmethod
    def create_rdma_buffer_blocking(
        cls, *, local: _LocalMemoryHandle, client: Any, rdma_manager_init: Handle[None] | None,
    ) -> _RdmaBuffer:
        """Register `local`'s memory for the actor `client` once `rdma_manager_init` resolved
        (blocking until then; its failure is raised)."""
        if not isinstance(local, _LocalMemoryHandle):
            raise TypeError(
                f"local must be a _LocalMemoryHandle, not {type(local).__name__}."
            )
        return cls(RdmaBuffer.create(local, _actor_id(client), _ready(rdma_manager_init)))

    @property
    def core(self) -> RdmaBuffer:
        """The registered buffer."""
        return self._core

    def __reduce__(self) -> tuple[Any, ...]:
        return (_RdmaBuffer, (self._core,))

    def size(self) -> int:
        """The buffer's length in bytes."""
        return self._core.size()

    def owner_actor_id(self) -> str:
        """The id string of the actor that created the buffer."""
        return self._core.owner_actor_id()

    def drop(self, *, client: Any, rdma_manager_init: Handle[None] | None) -> Future[None]:
        """Release the registration once `rdma_manager_init` resolved."""
        _actor_id(client)
        return Future.from_concurrent(self._core.drop(_ready(rdma_manager_init)))


class _RdmaAction:
    """A batch of transfers (`buffer.RdmaAction`) under Monarch's binding calls."""

    __slots__ = ("_core",)

    def __init__(self) -> None:
        self._core = RdmaAction()

    @staticmethod
    def _remote(remote: Any) -> Any:
        return remote.core if isinstance(remote, _RdmaBuffer) else remote

    def add_read_into_local(self, *, remote: _RdmaBuffer, local: _LocalMemoryHandle) -> None:
        """Add: read all of `remote` into the leading bytes of `local`."""
        self._core.add_read_into_local(self._remote(remote), local)

    def add_write_from_local(self, *, remote: _RdmaBuffer, local: _LocalMemoryHandle) -> None:
        """Add: write all of `local` into the leading bytes of `remote`."""
        self._core.add_write_from_local(self._remote(remote), local)

    def submit(
        self, *, client: Any, timeout: float, rdma_manager_init: Handle[None] | None,
    ) -> Future[None]:
        """Run every operation once `rdma_manager_init` resolved; resolves when all finished."""
        check_timeout(timeout, "RDMAAction.submit")
        _actor_id(client)
        return Future.from_concurrent(self._core.submit(timeout, _ready(rdma_manager_init)))
