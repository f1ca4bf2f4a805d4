"""`Tensor`, the distributed tensor, and `reduce`/`reduce_` (as `monarch` exports them)."""

from monarch._src.tensor.collectives import reduce, reduce_
from monarch._src.tensor.tensor import Tensor

__all__ = ["Tensor", "reduce", "reduce_"]
