"""The RDMA feature's control operations (`runtime/control.py`): a requester asks a buffer's
owner process (`control.py` handles them there, `readiness.py` handles `RdmaInit`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from monarch._src.lowlevel import control_op

if TYPE_CHECKING:
    from monarch._src.rdma.verbs import QpInfo

__all__ = ["RdmaCuda", "RdmaDrop", "RdmaIbConnect", "RdmaInit", "RdmaShm"]


@control_op("rdma_init")
class RdmaInit(NamedTuple):
    """Start the receiving proc's RDMA manager."""


@control_op("rdma_drop")
class RdmaDrop(NamedTuple):
    """Unregister buffer `buffer_id` on behalf of a handle that does not own it."""

    buffer_id: int
    token: int


@control_op("rdma_shm")
class RdmaShm(NamedTuple):
    """Copy `length` bytes at `offset` of the buffer to (`write`: from) the requester's shared
    memory segment `name` (the same-host plane)."""

    buffer_id: int
    token: int
    write: bool
    offset: int
    length: int
    name: str


@control_op("rdma_cuda")
class RdmaCuda(NamedTuple):
    """Copy the leading `length` bytes of a CUDA buffer to (`to_device`: from) its pinned
    mirror."""

    buffer_id: int
    token: int
    to_device: bool
    length: int


@control_op("rdma_ib_connect")
class RdmaIbConnect(NamedTuple):
    """Create and connect the owner's end of a verbs queue pair; answered with its info."""

    qp: QpInfo  # the requester's end
