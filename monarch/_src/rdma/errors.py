"""The RDMA-specific errors: using a buffer after `drop()`, and a manager that cannot start."""

from __future__ import annotations

from monarch._src.supervision.errors import MonarchError

__all__ = ["RDMABufferDroppedError", "RdmaInitError"]


class RDMABufferDroppedError(MonarchError, RuntimeError):
    """A transfer named a buffer whose registration was released with `drop()`."""

    def __reduce__(self) -> tuple[object, ...]:
        return (RDMABufferDroppedError, self.args)


class RdmaInitError(MonarchError, RuntimeError):
    """A proc's RDMA manager could not start: no usable backend, or a malformed setting such as
    `rdma_ibverbs_target`. The message says which and what to change."""

    def __reduce__(self) -> tuple[object, ...]:
        return (RdmaInitError, self.args)
