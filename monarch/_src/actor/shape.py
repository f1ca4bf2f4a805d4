"""torchmonarch's `monarch._src.actor.shape`: shapes and the mesh protocol (no runtime)."""

from monarch._src.shape import Extent, MeshTrait, NDSlice, Shape, Slice

__all__ = ["Extent", "MeshTrait", "NDSlice", "Shape", "Slice"]
