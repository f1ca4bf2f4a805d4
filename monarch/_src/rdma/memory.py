"""Local memory as the RDMA code sees it: a 1-D contiguous region with an address.

`as_region` accepts a torch tensor (only when torch is already imported: a tensor argument means
it is) or a memoryview, checks the contract's rules synchronously (1-D, contiguous, non-empty,
writable when it will be written), and returns a `Region` that keeps the object alive. Addresses
of memoryviews come from numpy, which monarch already imports, so torch is never needed for them.

`LocalMemoryHandle` is what an RDMA operation holds on its local side (torchmonarch's
`_LocalMemoryHandle`): a checked region, `read_at`/`write_at` for byte ranges, and `downgrade()`
to a `WeakLocalMemoryHandle` that does not keep the memory alive, which is what callers cache.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LocalMemoryHandle",
    "Region",
    "WeakLocalMemoryHandle",
    "as_region",
    "assert_1d_contiguous",
    "handle_from_memoryview",
    "handle_from_tensor",
    "is_tensor",
    "memoryview_addr_and_size",
    "tensor_addr_and_size",
]


@dataclass(frozen=True)
class Region:
    """A contiguous span of this process's memory."""

    addr: int  # address of the first byte
    nbytes: int  # length in bytes (> 0 for registered buffers)
    writable: bool  # False for read-only memoryviews (e.g. over bytes)
    device: str  # "cpu" or "cuda:<index>"
    keepalive: Any  # the object whose memory this is; held so the memory stays mapped

    def sub(self, nbytes: int) -> Region:
        """The leading `nbytes` of this region."""
        return Region(self.addr, nbytes, self.writable, self.device, self.keepalive)


def is_tensor(obj: object) -> bool:
    """True if `obj` is a torch tensor (without importing torch when it is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _not_1d_contiguous(obj: object) -> ValueError:
    # Monarch's text for any local memory that is not one contiguous dimension.
    return ValueError(
        "RDMABuffer only supports 1d contiguous torch.Tensor or 1d c-contiguous memoryview. "
        f"Got: {obj}"
    )


def as_region(obj: object, what: str, *, allow_empty: bool = False,
              need_writable: bool = False) -> Region:
    """Check `obj` (described as `what` in errors) and return its memory as a `Region`.

    A registered buffer (`allow_empty=False`) of size 0 raises Monarch's ValueError.
    """
    if is_tensor(obj):
        return _tensor_region(obj, what, allow_empty, need_writable)
    if isinstance(obj, memoryview):
        return _view_region(obj, what, allow_empty, need_writable)
    # Monarch refuses anything else (bytes, bytearray, lists) with its layout error too;
    # memoryview(obj) is what such objects need.
    raise _not_1d_contiguous(obj)


def _tensor_region(t: Any, what: str, allow_empty: bool, need_writable: bool) -> Region:
    if t.dim() != 1 or not t.is_contiguous():
        raise _not_1d_contiguous(t)
    nbytes = t.numel() * t.element_size()
    if nbytes == 0 and not allow_empty:
        raise ValueError("Cannot create RDMABuffer with size 0.")
    device = "cpu" if t.device.type == "cpu" else f"{t.device.type}:{t.device.index or 0}"
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what} is on device {t.device}; only CPU and CUDA tensors work.")
    return Region(int(t.data_ptr()), nbytes, True, device, t)


def _view_region(mv: memoryview, what: str, allow_empty: bool, need_writable: bool) -> Region:
    if mv.ndim != 1 or not mv.c_contiguous:
        raise _not_1d_contiguous(mv)
    if mv.nbytes == 0 and not allow_empty:
        raise ValueError("Cannot create RDMABuffer with size 0.")
    if need_writable and mv.readonly:
        raise ValueError(f"{what} is read-only; pass a memoryview over writable memory.")
    if mv.nbytes == 0:
        return Region(0, 0, not mv.readonly, "cpu", mv)
    import numpy as np

    arr = np.frombuffer(mv.cast("B") if mv.format != "B" else mv, dtype=np.uint8)
    return Region(int(arr.ctypes.data), mv.nbytes, not mv.readonly, "cpu", (mv, arr))


# ---- local memory handles ------------------------------------------------------------------
# What an RDMA operation holds on its local side. A `LocalMemoryHandle` holds its region (which
# keeps the user's object alive) and knows the region's *backing*: a tensor's storage, or the
# memoryview itself. `downgrade()` gives a `WeakLocalMemoryHandle` that refers to the backing
# weakly: it keeps nothing alive, and `upgrade()` makes a strong handle again for as long as the
# backing lives (which any strong handle ensures). Callers cache weak handles
# (`monarch._src.rdma.rdma`).


def _out_of_bounds(offset: int, size: int, total: int) -> RuntimeError:
    return RuntimeError(
        f"The local memory range {offset}..{offset + size} is outside the handle's {total} "
        "bytes; keep offset + size within handle.size."
    )


def _device_bytes(region: Region) -> Any:
    """A 1-D uint8 tensor over a CUDA region (its keepalive is a tensor)."""
    from monarch._src.rdma.cuda import as_bytes

    return as_bytes(region.keepalive)


class LocalMemoryHandle:
    """A strong handle on a 1-D contiguous region of this process's memory (CPU or CUDA)."""

    __slots__ = ("_backing", "_region")

    def __init__(self, region: Region, backing: object) -> None:
        self._region = region
        self._backing = backing  # what a weak handle watches: a storage or a memoryview

    @property
    def region(self) -> Region:
        """The memory, with the object that keeps it alive."""
        return self._region

    @property
    def addr(self) -> int:
        """The address of the first byte."""
        return self._region.addr

    @property
    def size(self) -> int:
        """The length in bytes."""
        return self._region.nbytes

    @property
    def device(self) -> str:
        """"cpu" or "cuda:<index>"."""
        return self._region.device

    def _check(self, offset: int, size: int) -> None:
        total = self.size
        if offset < 0 or size < 0 or offset + size > total:
            raise _out_of_bounds(offset, size, total)

    def read_at(self, offset: int, size: int) -> bytes:
        """A copy of `size` bytes from `offset`; RuntimeError if the range is outside."""
        self._check(offset, size)
        region = self._region
        if region.device != "cpu":
            flat = _device_bytes(region)
            return bytes(flat[offset:offset + size].cpu().numpy().tobytes())
        return ctypes.string_at(region.addr + offset, size)

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Copy `data` into the memory at `offset`; RuntimeError if it does not fit,
        ValueError for read-only memory."""
        src = memoryview(data).cast("B")
        self._check(offset, src.nbytes)
        region = self._region
        if not region.writable:
            raise ValueError("This local memory is read-only (a memoryview over bytes?); "
                             "make the handle over writable memory to write into it.")
        if src.nbytes == 0:
            return
        if region.device != "cpu":
            import torch

            host = torch.frombuffer(bytearray(src), dtype=torch.uint8)
            _device_bytes(region)[offset:offset + src.nbytes].copy_(host)
            return
        buf = (ctypes.c_char * src.nbytes).from_buffer_copy(src)
        ctypes.memmove(region.addr + offset, buf, src.nbytes)

    def downgrade(self) -> WeakLocalMemoryHandle:
        """A handle that does not keep the memory alive (see `WeakLocalMemoryHandle`)."""
        return WeakLocalMemoryHandle(self._region, self._backing)

    def __repr__(self) -> str:
        return f"<LocalMemoryHandle {self.size} bytes at {self.addr:#x} on {self.device}>"


class WeakLocalMemoryHandle:
    """A handle on the memory of a `LocalMemoryHandle` that refers to its backing weakly."""

    __slots__ = ("_addr", "_device", "_nbytes", "_ref", "_writable")

    def __init__(self, region: Region, backing: object) -> None:
        self._addr, self._nbytes = region.addr, region.nbytes
        self._writable, self._device = region.writable, region.device
        self._ref = weakref.ref(backing)

    def upgrade(self) -> LocalMemoryHandle | None:
        """A new strong handle on the same memory, or None once its backing was collected."""
        backing = self._ref()
        if backing is None:
            return None
        keepalive: Any = backing
        if self._device != "cpu":  # the CUDA paths need a tensor over the region
            import torch

            storage: Any = backing
            keepalive = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(
                storage, self._addr - int(storage.data_ptr()), (self._nbytes,), (1,))
        region = Region(self._addr, self._nbytes, self._writable, self._device, keepalive)
        return LocalMemoryHandle(region, backing)


def assert_1d_contiguous(obj: object) -> None:
    """Raise Monarch's ValueError unless `obj` is a 1-D contiguous tensor or 1-D C-contiguous
    memoryview (anything else gets the same error)."""
    if is_tensor(obj):
        t: Any = obj
        if t.dim() != 1 or not t.is_contiguous():
            raise _not_1d_contiguous(obj)
        return
    if isinstance(obj, memoryview):
        if obj.ndim != 1 or not obj.c_contiguous:
            raise _not_1d_contiguous(obj)
        return
    raise _not_1d_contiguous(obj)


def memoryview_addr_and_size(mv: memoryview) -> tuple[int, int]:
    """(address of the first byte, length in bytes) of a 1-D C-contiguous memoryview."""
    if not isinstance(mv, memoryview):
        raise TypeError(f"Expected a memoryview, got {type(mv).__name__}.")
    region = _view_region(mv, "The memoryview", True, False)
    return region.addr, region.nbytes


def tensor_addr_and_size(t: Any) -> tuple[int, int]:
    """(address of the first byte, length in bytes) of a 1-D contiguous torch tensor."""
    if not is_tensor(t):
        raise TypeError(f"Expected a torch.Tensor, got {type(t).__name__}.")
    region = _tensor_region(t, "The tensor", True, False)
    return region.addr, region.nbytes


def handle_from_memoryview(mv: memoryview) -> LocalMemoryHandle:
    """A strong handle over a 1-D C-contiguous memoryview (it keeps `mv` alive)."""
    if not isinstance(mv, memoryview):
        raise TypeError(f"Expected a memoryview, got {type(mv).__name__}.")
    return LocalMemoryHandle(_view_region(mv, "The memoryview", True, False), mv)


def handle_from_tensor(t: Any) -> LocalMemoryHandle:
    """A strong handle over a 1-D contiguous CPU or CUDA tensor (it keeps `t` alive)."""
    if not is_tensor(t):
        raise TypeError(f"Expected a torch.Tensor, got {type(t).__name__}.")
    return LocalMemoryHandle(_tensor_region(t, "The tensor", True, False), t.untyped_storage())
