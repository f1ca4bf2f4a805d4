"""torchmonarch's `monarch._src.actor.shape`: shapes and the mesh protocol (no runtime)."""

from typing import Any

from monarch._src.shape import Extent, MeshTrait, NDSlice, Shape, Slice

__all__ = ["Extent", "MeshTrait", "NDSlice", "Shape", "ShapeExt", "Slice"]


class ShapeExt:
    """Selection on a `Shape` by dimension name, as `mesh.slice(**dims)` does on a mesh."""

    @staticmethod
    def slice(shape: Shape, **kwargs: Any) -> Shape:
        """Select along named dimensions: an int removes the dimension, a `slice` restricts
        it (`ShapeExt.slice(shape, batch=3, gpu=slice(2, 6))`)."""
        for label, selector in kwargs.items():
            if label not in shape.labels:
                raise TypeError(f"Shape does not have dimension labeled {label!r}")
            if isinstance(selector, slice):
                shape = shape.select(label, selector)
            else:
                size = shape.ndslice.sizes[shape.labels.index(label)]
                if selector < 0 or selector >= size:
                    raise IndexError("index out of range")
                shape = shape.at(label, selector)
        return shape
