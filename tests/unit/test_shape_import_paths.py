"""torchmonarch's private import paths for the shape types name the same classes as ours."""

from __future__ import annotations

import monarch
import monarch._rust_bindings.monarch_hyperactor.shape as binding_shape_path
import monarch._src.actor.shape as monarch_shape_path
from monarch._src import shape


def test_shape_import_path_reexports_the_shape_classes() -> None:
    assert monarch_shape_path.Shape is shape.Shape is monarch.Shape
    assert monarch_shape_path.NDSlice is shape.Slice is monarch.NDSlice
    assert monarch_shape_path.Extent is shape.Extent is monarch.Extent
    assert monarch_shape_path.MeshTrait is shape.MeshTrait


def test_binding_shape_path_reexports_region_and_friends() -> None:
    assert binding_shape_path.Region is shape.Region
    assert binding_shape_path.Slice is shape.Slice
    assert binding_shape_path.Point is shape.Point
    region = shape.Extent(["a"], [2]).region
    # The repr names the path this module provides.
    assert repr(region).startswith("<monarch._rust_bindings.monarch_hyperactor.shape.Region object")
