"""CUDA tensors: staged through pinned host memory (there is no GPUDirect path in this port).

Owner side: registering a CUDA tensor allocates a pinned host *mirror* of the same size; peers'
data planes address the mirror, and a control op (`rdma_cuda`, answered on the owner's RDMA
worker threads) copies device->mirror before a peer reads and mirror->device after a peer writes.
Requester side: a CUDA destination or source is staged through a pinned host buffer in the
requester, and the copy to or from the device happens after or before the network part.

torch is imported only here, and only for tensors that are already torch tensors.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from monarch._src.rdma.manager import Manager

__all__ = ["as_bytes", "mirror_for", "pinned_like", "serve_stage", "warn_allocator"]


def as_bytes(t: Any) -> Any:
    """The 1-D contiguous tensor `t` as a uint8 tensor over the same memory."""
    import torch

    return t.view(torch.uint8) if t.dtype != torch.uint8 else t


def pinned_like(nbytes: int) -> Any:
    """A pinned host uint8 tensor of `nbytes` bytes."""
    import torch

    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)


def mirror_for(t: Any) -> Any:
    """The pinned host mirror a CUDA buffer's peers read and write."""
    return pinned_like(t.numel() * t.element_size())


def warn_allocator() -> None:
    """Warn (as Monarch does) when CUDA memory is registered without expandable segments."""
    if "expandable_segments:True" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        warnings.warn(
            "RDMABuffer over CUDA memory works best with "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True set before torch initializes CUDA.",
            UserWarning,
            stacklevel=3,
        )


def serve_stage(manager: Manager, bid: int, token: int, to_device: bool, length: int) -> None:
    """Owner side of `rdma_cuda`: copy the leading `length` bytes device<->pinned mirror."""
    entry = manager.lookup(bid, token)
    if entry is None:
        from monarch._src.rdma.errors import RDMABufferDroppedError

        raise RDMABufferDroppedError(f"RDMA buffer {bid} is not registered: it was dropped.")
    if entry.mirror is None:
        raise RuntimeError(f"RDMA buffer {bid} is not a CUDA buffer.")
    dev = as_bytes(entry.region.keepalive)[:length]
    host = entry.mirror[:length]
    if to_device:
        dev.copy_(host, non_blocking=False)
    else:
        host.copy_(dev, non_blocking=False)
    import torch

    torch.cuda.synchronize(dev.device)
