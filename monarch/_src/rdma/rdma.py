"""torchmonarch's `monarch._src.rdma.rdma` import path (the one `RDMABuffer`'s repr names), and
the list of the names `monarch.rdma` exports.

The public facade `monarch.rdma` takes its names and `__all__` from here, so the two paths give
the same objects and cannot drift apart; nothing under `monarch._src` imports the facade.
"""

from monarch._src.rdma.backend import (
    RDMAReadTransferWarning,
    RDMATcpFallbackWarning,
    RDMAWriteTransferWarning,
    get_rdma_backend,
    is_ibverbs_available,
    is_rdma_available,
)
from monarch._src.rdma.buffer import RDMAAction, RDMABuffer

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
