"""Shapes of meshes: strided rank sets (`Slice`), named sizes (`Extent`), positions (`Point`),
labelled rank sets (`Shape`, `Region`) and the mesh protocol built on them (`MeshTrait`).

Everything here is pure standard-library Python so it can be imported by any process,
including ones that never load the transport.
"""

from monarch._src.shape.extent import DimensionNotFound, Extent, Point
from monarch._src.shape.mesh_trait import MeshTrait
from monarch._src.shape.region import Region
from monarch._src.shape.shape import Shape
from monarch._src.shape.slice import NDSlice, Slice

__all__ = [
    "DimensionNotFound",
    "Extent",
    "MeshTrait",
    "NDSlice",
    "Point",
    "Region",
    "Shape",
    "Slice",
]
