"""torchmonarch's `monarch._src.rdma.rdma`: the Python API of RDMA buffers (`RDMABuffer`,
`RDMAAction`), over the binding layer `monarch._rust_bindings.rdma`. The public facade
`monarch.rdma` takes its names and `__all__` from here.

What lives here, as on Monarch:

* The cache of local memory handles. Every operation turns its local tensor or memoryview into
  a `_LocalMemoryHandle` (`_make_local_memory_handle`); the handles of memory seen before are
  found again rather than made anew. The cache maps `(id of the backing, address, size)` to a
  `_WeakLocalMemoryHandle`, which does not keep the memory alive: the backing is a tensor's
  `untyped_storage()` (so transient views of one tensor share an entry) or the memoryview
  itself, and a weakref to it evicts the entry when it is collected (`_evict_local_memory`;
  the registered weakref must still be the one firing, so a stale callback never evicts a newer
  entry whose backing reused the id). The lock is reentrant: releasing a cached handle can
  collect another backing on the same thread, whose eviction then runs inside the first.
* The per-mesh cache of the RDMA managers' start (`_ensure_init_rdma_manager_on_mesh`): one
  observe-only `Handle` per proc mesh, held weakly by the mesh (a cache entry never keeps a mesh
  alive), created under the lock so concurrent first calls start one initialization. Buffer
  creation, `submit` and `drop` pass the caller's mesh's handle down; the binding waits for it.
* Argument checks that come before any of that (the backend, the timeout), so a bad call
  starts nothing.

Each name is looked up in this module when used, so a caller that replaces one (a test's
monkeypatch, as Monarch's own tests do) changes what the API calls.

This module is a facade by role (it is torchmonarch's private path, like `monarch._src.actor`):
it may import the binding layer, which the rdma feature package may not.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

from monarch._rust_bindings.monarch_hyperactor.handle import Handle
from monarch._rust_bindings.monarch_hyperactor.pytokio import Shared
from monarch._rust_bindings.rdma import (  # noqa: F401 - also the names callers import from here
    _assert_1d_contiguous,
    _get_memoryview_addr_and_size,
    _get_tensor_addr_and_size,
    _LocalMemoryHandle,
    _make_local_memory_handle_from_memoryview,
    _make_local_memory_handle_from_tensor,
    _RdmaAction,
    _RdmaBuffer,
    _RdmaManager,
    _WeakLocalMemoryHandle,
)
from monarch._src.lowlevel import Future
from monarch._src.mesh.context import context
from monarch._src.rdma.backend import (
    RDMAReadTransferWarning,
    RDMATcpFallbackWarning,
    RDMAWriteTransferWarning,
    get_rdma_backend,
    is_ibverbs_available,
    is_rdma_available,
    warn_tcp_fallback_once,
)
from monarch._src.rdma.buffer import check_timeout
from monarch._src.rdma.handle import BufferHandle

__all__ = [
    "RDMAAction",
    "RDMABuffer",
    "RDMAReadTransferWarning",
    "RDMATcpFallbackWarning",
    "RDMAWriteTransferWarning",
    "get_rdma_backend",
    "is_ibverbs_available",
    "is_rdma_available",
]



# ---- the RDMA managers' start, per proc mesh ---------------------------------------------------
_rdma_manager_init_cache: weakref.WeakKeyDictionary[Any, Handle[None]] = (
    weakref.WeakKeyDictionary()
)
_rdma_manager_init_cache_lock = threading.Lock()


def _ensure_init_rdma_manager_on_mesh(proc_mesh: Any) -> Handle[None]:
    """The `Handle` of the start of `proc_mesh`'s RDMA managers: started on the first call for
    that mesh object, the same handle after (it only observes; awaiting it never re-runs)."""
    with _rdma_manager_init_cache_lock:
        cached = _rdma_manager_init_cache.get(proc_mesh)
        if cached is not None:
            return cached
        # Created under the lock: a concurrent first call waits and finds this one. The call
        # returns at once (the start runs in the background).
        # On Monarch a ProcMesh wraps its native mesh as a Shared; here the Python ProcMesh is
        # the whole mesh, so the binding gets the mesh itself.
        created = _RdmaManager.ensure_init_rdma_manager_nonblocking(
            Shared.from_value(proc_mesh), context().actor_instance
        )
        _rdma_manager_init_cache[proc_mesh] = created
        return created


def _ensure_init_rdma_manager() -> Handle[None]:
    """The start of the RDMA managers of the calling actor's proc mesh (the client's: its own
    process). Resolved per call, cached per mesh."""
    proc_mesh = context().actor_instance.proc_mesh
    if proc_mesh is None:
        raise RuntimeError(
            "The calling actor has no proc mesh, so its RDMA managers cannot start; create "
            "RDMA buffers and submit transfers from an actor or the client."
        )
    return _ensure_init_rdma_manager_on_mesh(proc_mesh)


# ---- local memory handles ----------------------------------------------------------------------
_local_memory_cache: dict[tuple[int, int, int], Any] = {}  # key -> _WeakLocalMemoryHandle
_local_memory_cache_refs: dict[tuple[int, int, int], weakref.ref[Any]] = {}
_local_memory_cache_lock = threading.RLock()


def _evict_local_memory(key: tuple[int, int, int], ref: weakref.ref[Any]) -> None:
    """Drop the cache entry `key` when its backing was collected, if `ref` is still the
    weakref registered for it (a newer entry under a reused id keeps its own)."""
    with _local_memory_cache_lock:
        if _local_memory_cache_refs.get(key) is ref:
            del _local_memory_cache_refs[key]
            _local_memory_cache.pop(key, None)


def _is_torch_tensor(obj: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _make_local_memory_handle(data: Any) -> Any:
    """A `_LocalMemoryHandle` over `data` (a 1-D contiguous tensor or memoryview), the cached
    one when a handle over the same memory of the same backing is still alive."""
    _assert_1d_contiguous(data)
    backing: Any
    if isinstance(data, memoryview):
        addr, size = _get_memoryview_addr_and_size(data)
        backing = data
    elif _is_torch_tensor(data):
        addr, size = _get_tensor_addr_and_size(data)
        backing = data.untyped_storage()
    else:
        raise TypeError(
            f"RDMA local memory must be a torch.Tensor or a memoryview, not {type(data).__name__}."
        )
    key = (id(backing), addr, size)
    with _local_memory_cache_lock:
        weak = _local_memory_cache.get(key)
        if weak is not None:
            cached = weak.upgrade()
            if cached is not None:
                return cached
            # The memory's last strong handle is gone but the entry is not evicted yet.
            _local_memory_cache.pop(key, None)
            _local_memory_cache_refs.pop(key, None)
    if isinstance(data, memoryview):
        strong = _make_local_memory_handle_from_memoryview(data)
    else:
        strong = _make_local_memory_handle_from_tensor(data)
    weak = strong.downgrade()

    def evict(r: weakref.ref[Any], k: tuple[int, int, int] = key) -> None:
        _evict_local_memory(k, r)

    ref = weakref.ref(backing, evict)
    with _local_memory_cache_lock:
        _local_memory_cache[key] = weak
        _local_memory_cache_refs[key] = ref
    return strong


# ---- the API ------------------------------------------------------------------------------------
class RDMABuffer:
    """Memory registered for one-sided reads and writes by other procs.

    Make it in the actor that owns the memory, from a 1-D contiguous tensor (CPU or CUDA) or a
    1-D C-contiguous memoryview; the buffer keeps that object alive. Pass it in messages freely:
    only a small handle travels.
    """

    _buffer: Any  # the binding's _RdmaBuffer

    def __init__(self, data: Any) -> None:
        backend = get_rdma_backend()
        if backend == "none":
            raise RuntimeError(
                "Tried to create an RDMABuffer, but RDMA is not available on this platform. To "
                "enable TCP fallback transport, call monarch.configure(rdma_allow_tcp_fallback="
                "True) before creating buffers."
            )
        if backend == "tcp":
            warn_tcp_fallback_once()
        # The local memory is checked before the managers start: a bad argument starts nothing.
        handle = _make_local_memory_handle(data)
        if handle.size == 0:
            raise ValueError("Cannot create RDMABuffer with size 0.")
        ctx = context()
        ready = _ensure_init_rdma_manager()
        self._buffer = _RdmaBuffer.create_rdma_buffer_blocking(
            local=handle, client=ctx.actor_instance, rdma_manager_init=ready
        )

    @classmethod
    def _from_buffer(cls, buffer: Any) -> RDMABuffer:
        buf = object.__new__(cls)
        buf._buffer = buffer
        return buf

    @classmethod
    def _from_handle(cls, handle: BufferHandle) -> RDMABuffer:
        """A holder's copy of the buffer `handle` describes."""
        from monarch._src.rdma.buffer import RdmaBuffer

        return cls._from_buffer(_RdmaBuffer(RdmaBuffer.from_handle(handle)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (RDMABuffer._from_buffer, (self._buffer,))

    @property
    def _handle(self) -> BufferHandle:
        """What the buffer pickles to (owner, address, token, endpoints)."""
        return self._buffer.core.handle  # type: ignore[no-any-return]

    @property
    def _plane(self) -> str:
        """The data plane a transfer from this process uses: "process_vm", "shm", "tcp",
        "ibverbs", or "none" when the buffer cannot be reached from here."""
        return self._buffer.core.plane  # type: ignore[no-any-return]

    def size(self) -> int:
        """The buffer's length in bytes."""
        return int(self._buffer.size())

    @property
    def owner(self) -> str:
        """The id string of the actor that created the buffer."""
        return str(self._buffer.owner_actor_id())

    @property
    def backend(self) -> str:
        """The RDMA backend, as `get_rdma_backend()` says: "ibverbs", "tcp" or "none"."""
        return get_rdma_backend()

    def read_into(self, dst: Any, *, timeout: float = 60) -> Future[None]:
        """Copy the whole buffer into the leading bytes of local `dst` (1-D contiguous, at
        least `size()` bytes)."""
        return RDMAAction().read_remote(dst, self).submit(timeout=timeout)

    def write_from(self, src: Any, *, timeout: float = 60) -> Future[None]:
        """Copy local `src` (1-D contiguous, at most `size()` bytes) into the leading bytes."""
        return RDMAAction().write_remote(self, src).submit(timeout=timeout)

    def drop(self) -> Future[None]:
        """Release the registration; later transfers through any handle of it fail."""
        client = context().actor_instance
        ready = _ensure_init_rdma_manager()
        return self._buffer.drop(client=client, rdma_manager_init=ready)  # type: ignore[no-any-return]


def _binding_of(buffer: Any) -> Any:
    # An RDMABuffer's binding object; anything else goes down as it is, to be refused there.
    return buffer._buffer if isinstance(buffer, RDMABuffer) else buffer


class RDMAAction:
    """A batch of reads and writes, to one or many owners, submitted together (re-submittable).
    Each operation is checked when added."""

    def __init__(self) -> None:
        self._inner = _RdmaAction()

    def read_remote(self, dst: Any, src: RDMABuffer) -> RDMAAction:
        """Add: read all of `src` into the leading bytes of local `dst`."""
        handle = _make_local_memory_handle(dst)
        self._inner.add_read_into_local(remote=_binding_of(src), local=handle)
        return self

    def write_remote(self, dst: RDMABuffer, src: Any) -> RDMAAction:
        """Add: write local `src` into the leading bytes of `dst`."""
        handle = _make_local_memory_handle(src)
        self._inner.add_write_from_local(remote=_binding_of(dst), local=handle)
        return self

    def fetch_add(self, *args: Any, **kwargs: Any) -> RDMAAction:
        """Not supported (as on Monarch 0.7.0)."""
        raise NotImplementedError("Not yet supported")

    def compare_and_swap(self, *args: Any, **kwargs: Any) -> RDMAAction:
        """Not supported (as on Monarch 0.7.0)."""
        raise NotImplementedError("Not yet supported")

    def submit(self, *, timeout: float = 60) -> Future[None]:
        """Run every operation concurrently; resolves when all finished, fails if any failed.
        Safe to call again."""
        check_timeout(timeout, "RDMAAction.submit")  # before anything starts
        client = context().actor_instance
        ready = _ensure_init_rdma_manager()
        return self._inner.submit(client=client, timeout=timeout, rdma_manager_init=ready)
