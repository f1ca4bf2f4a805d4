"""Backend discovery and the warning classes of `monarch.rdma`.

`get_rdma_backend()` names the network backend as Monarch does ("ibverbs", "tcp" or "none");
the plane a particular transfer uses (which may be a same-host copy) is `RDMABuffer.backend`.
"""

from __future__ import annotations

import threading
import warnings

from monarch._src.config import get as config_get
from monarch._src.rdma.ibverbs import probe

__all__ = [
    "RDMAReadTransferWarning",
    "RDMATcpFallbackWarning",
    "RDMAWriteTransferWarning",
    "get_rdma_backend",
    "is_ibverbs_available",
    "is_rdma_available",
    "warn_tcp_fallback_once",
]


class RDMAReadTransferWarning(Warning):
    """A read transfer took a slower path than the backend promises (e.g. staging)."""


class RDMAWriteTransferWarning(Warning):
    """A write transfer took a slower path than the backend promises (e.g. staging)."""


class RDMATcpFallbackWarning(Warning):
    """No ibverbs device: buffers move over TCP (or same-host copies) instead."""


def is_ibverbs_available() -> bool:
    """True when a verbs device can be used through pyverbs in this process."""
    return probe().available


def is_rdma_available() -> bool:
    """Deprecated alias of `is_ibverbs_available()`."""
    # Monarch's words, so filters and logs written for it match.
    warnings.warn(
        "is_rdma_available is deprecated because Monarch now supports multiple RDMA backends, "
        "making this function ambiguous. For now it indicates whether RDMA over ibverbs is "
        "available. Use is_ibverbs_available() or get_rdma_backend() instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    return is_ibverbs_available()


def get_rdma_backend() -> str:
    """ "ibverbs" with a verbs device, else "tcp" if the TCP fallback is allowed, else "none"."""
    if is_ibverbs_available():
        return "ibverbs"
    if config_get("rdma_allow_tcp_fallback"):
        return "tcp"
    return "none"


_warned_lock = threading.Lock()
_warned = False  # the fallback warning is emitted once per process


def warn_tcp_fallback_once() -> None:
    """Emit `RDMATcpFallbackWarning` the first time a buffer is created without ibverbs."""
    global _warned
    with _warned_lock:
        if _warned:
            return
        _warned = True
    # Monarch's words. Here "TCP" covers every non-verbs plane: between procs of one host the
    # bytes move by a direct process-to-process copy, which docs/rdma.md describes.
    warnings.warn(
        "No ibverbs RDMA hardware detected. Falling back to TCP transport, which has "
        "significantly lower throughput and higher latency than native RDMA. To disable this "
        "fallback and fail explicitly, call monarch.configure(rdma_allow_tcp_fallback=False).",
        RDMATcpFallbackWarning,
        stacklevel=3,
    )
