"""torchmonarch's `monarch._src.rdma.rdma` import path (the one `RDMABuffer`'s repr names)."""

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
