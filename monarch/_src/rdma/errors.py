"""The RDMA-specific error: using a buffer after `drop()`."""

from __future__ import annotations

from monarch._src.supervision.errors import MonarchError

__all__ = ["RDMABufferDroppedError"]


class RDMABufferDroppedError(MonarchError, RuntimeError):
    """A transfer named a buffer whose registration was released with `drop()`."""

    def __reduce__(self) -> tuple[object, ...]:
        return (RDMABufferDroppedError, self.args)
