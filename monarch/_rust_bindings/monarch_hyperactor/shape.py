"""torchmonarch's `monarch._rust_bindings.monarch_hyperactor.shape`: the shape value types.

On Monarch these are Rust classes; here they are `monarch._src.shape`'s, re-exported under the
path Monarch's own modules import them from (and that `Region`'s repr names).
"""

from monarch._src.shape import Extent, Point, Region, Shape, Slice

__all__ = ["Extent", "Point", "Region", "Shape", "Slice"]
