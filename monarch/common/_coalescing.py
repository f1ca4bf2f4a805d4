"""`coalescing()`: the operations of a block leave as one batch (as `monarch` exports it)."""

from monarch._src.tensor.stream import coalescing

__all__ = ["coalescing"]
