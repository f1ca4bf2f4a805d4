"""Unit tests for `Shape`: labelled dimensions over a `Slice`, with `at`/`select`/`index`."""

from __future__ import annotations

import pickle
import re

import pytest

from monarch._src.shape import Extent, Region, Shape, Slice


def _grid() -> Shape:
    return Shape(["hosts", "gpus"], Slice.new_row_major([4, 3]))


def test_shape_fields_expose_labels_slice_extent_region() -> None:
    s = _grid()
    assert s.labels == ["hosts", "gpus"]
    assert s.ndslice == Slice.new_row_major([4, 3])
    assert s.extent == Extent(["hosts", "gpus"], [4, 3])
    assert s.region == Region(["hosts", "gpus"], Slice.new_row_major([4, 3]))
    assert len(s) == 12
    assert s.ranks() == list(range(12))


def test_shape_unity_is_zero_dim_rank_zero() -> None:
    u = Shape.unity()
    assert u.labels == []
    assert len(u) == 1
    assert u.ranks() == [0]
    assert repr(u.extent) == "{}"


def test_shape_at_drops_dimension_and_keeps_global_ranks() -> None:
    s = _grid().at("gpus", 2)
    assert s.labels == ["hosts"]
    assert s.ranks() == [2, 5, 8, 11]


def test_shape_at_unknown_label_raises_value_error() -> None:
    with pytest.raises(ValueError, match=re.escape('invalid labels `["x"]`')):
        _grid().at("x", 0)


def test_shape_at_index_too_large_raises_value_error() -> None:
    with pytest.raises(ValueError, match="^out of range 3:4:1 for dimension gpus of size 3$"):
        _grid().at("gpus", 3)


def test_shape_at_negative_index_raises_overflow_error() -> None:
    with pytest.raises(OverflowError, match="negative"):
        _grid().at("gpus", -1)


def test_shape_select_keeps_dimension_with_step() -> None:
    s = _grid().select("hosts", slice(0, 3, 2))
    assert s.labels == ["hosts", "gpus"]
    assert s.ndslice == Slice(offset=0, sizes=[2, 3], strides=[6, 1])
    assert s.ranks() == [0, 1, 2, 6, 7, 8]


def test_shape_select_clamps_like_python() -> None:
    s = _grid()
    assert s.select("gpus", slice(1, 100)).extent.sizes == [4, 2]
    assert s.select("gpus", slice(-2, None)).ranks() == [1, 2, 4, 5, 7, 8, 10, 11]
    with pytest.raises(ValueError, match="^empty range 3:3:1$"):
        s.select("gpus", slice(5, 9))


def test_shape_select_non_slice_raises_type_error() -> None:
    with pytest.raises(TypeError, match="'int' object cannot be cast as 'slice'"):
        _grid().select("gpus", 1)  # type: ignore[arg-type]


def test_shape_select_negative_step_raises_value_error() -> None:
    with pytest.raises(ValueError, match="^nonrectangular shape$"):
        _grid().select("gpus", slice(None, None, -1))


def test_shape_select_unknown_label_raises_value_error() -> None:
    with pytest.raises(ValueError, match="invalid labels"):
        _grid().select("x", slice(0, 1))


def test_shape_index_applies_at_and_select() -> None:
    s = _grid().index(hosts=slice(1, 3), gpus=1)
    assert s.labels == ["hosts"]
    assert s.ranks() == [4, 7]


def test_shape_index_worked_fact_offset1_sizes22_strides61() -> None:
    s = Shape(["hosts", "gpus"], Slice.new_row_major([4, 3])).index(
        hosts=slice(0, 4, 2), gpus=slice(1, 3)
    )
    assert s.ndslice == Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    assert s.ranks() == [1, 2, 7, 8]


def test_shape_coordinates_maps_global_rank_to_labels() -> None:
    s = Shape(["hosts", "gpus"], Slice(offset=1, sizes=[2, 2], strides=[6, 1]))
    assert s.coordinates(7) == {"hosts": 1, "gpus": 0}
    with pytest.raises(ValueError):
        s.coordinates(3)


def test_shape_value_semantics_and_pickle() -> None:
    s = _grid().at("hosts", 1)
    assert s == Shape(["gpus"], Slice(offset=3, sizes=[3], strides=[1]))
    assert hash(s) == hash(Shape(["gpus"], Slice(offset=3, sizes=[3], strides=[1])))
    assert s != _grid()
    assert s != "shape"
    assert pickle.loads(pickle.dumps(s)) == s
    # Monarch's Rust Debug form for repr, the short form for str.
    expected = 'Shape { labels: ["gpus"], slice: Slice { offset: 3, sizes: [3], strides: [1] } }'
    assert repr(s) == expected
    assert str(s) == "{gpus=3}"
    assert str(_grid()) == "{hosts=4,gpus=3}"


def test_shape_label_count_mismatch_raises_value_error() -> None:
    with pytest.raises(ValueError, match="^label slice dimension mismatch: 1 != 2$"):
        Shape(["a"], Slice.new_row_major([2, 2]))


def test_shape_duplicate_labels_raise_value_error() -> None:
    with pytest.raises(ValueError, match="repeat a name"):
        Shape(["a", "a"], Slice.new_row_major([2, 2]))


def test_shape_bad_arguments_raise_type_error() -> None:
    with pytest.raises(TypeError, match="wrap it in a list"):
        Shape("a", Slice.new_row_major([2]))
    with pytest.raises(TypeError, match="needs a Slice"):
        Shape(["a"], [2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a string"):
        Shape([1], Slice.new_row_major([2]))  # type: ignore[list-item]
