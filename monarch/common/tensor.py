"""`Tensor`, the distributed tensor (as `monarch` exports it)."""

from monarch._src.tensor.tensor import Tensor

__all__ = ["Tensor"]
