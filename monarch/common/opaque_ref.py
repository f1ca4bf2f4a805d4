"""`OpaqueRef`, a reference to a worker-side Python object (as `monarch` exports it)."""

from monarch._src.tensor.opaque import OpaqueRef

__all__ = ["OpaqueRef"]
