"""Local memory as the RDMA code sees it: a 1-D contiguous region with an address.

`as_region` accepts a torch tensor (only when torch is already imported: a tensor argument means
it is) or a memoryview, checks the contract's rules synchronously (1-D, contiguous, non-empty,
writable when it will be written), and returns a `Region` that keeps the object alive. Addresses
of memoryviews come from numpy, which monarch already imports, so torch is never needed for them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Region", "as_region", "is_tensor"]


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
