"""Unit tests for `Extent`, `Point`, `Region` and `DimensionNotFound`."""

from __future__ import annotations

import pickle
from collections.abc import Mapping

import pytest
from hypothesis import given, settings, strategies as st

from monarch._src.shape import DimensionNotFound, Extent, Point, Region, Shape, Slice

# -- DimensionNotFound --------------------------------------------------------------------------


def test_dimension_not_found_is_key_error_and_value_error() -> None:
    exc = DimensionNotFound("x")
    assert isinstance(exc, KeyError)
    assert isinstance(exc, ValueError)
    assert exc.label == "x"


def test_dimension_not_found_str_is_plain_message() -> None:
    assert str(DimensionNotFound("x")) == "Dimension 'x' not found"


def test_dimension_not_found_pickle_round_trips() -> None:
    exc = pickle.loads(pickle.dumps(DimensionNotFound("x")))
    assert isinstance(exc, DimensionNotFound)
    assert str(exc) == "Dimension 'x' not found"


# -- Extent -------------------------------------------------------------------------------------


def test_extent_fields_report_labels_sizes_and_count() -> None:
    e = Extent(["hosts", "gpus"], [2, 4])
    assert e.labels == ["hosts", "gpus"]
    assert e.sizes == [2, 4]
    assert e.nelements == 8
    assert len(e) == 2
    assert list(e) == ["hosts", "gpus"]
    assert e["gpus"] == 4


def test_extent_mapping_views_follow_dimension_order() -> None:
    e = Extent(["hosts", "gpus"], [2, 4])
    assert isinstance(e, Mapping)
    assert list(e.keys()) == ["hosts", "gpus"]
    assert list(e.values()) == [2, 4]
    assert list(e.items()) == [("hosts", 2), ("gpus", 4)]
    assert dict(e) == {"hosts": 2, "gpus": 4}
    assert "gpus" in e
    assert "x" not in e
    assert e.get("x") is None


def test_extent_repr_matches_monarch_format() -> None:
    assert repr(Extent(["hosts", "gpus"], [2, 4])) == "{hosts: 2, gpus: 4}"
    assert str(Extent(["hosts", "gpus"], [1, 2])) == "{hosts: 1, gpus: 2}"


def test_extent_repr_quotes_labels_outside_word_characters() -> None:
    assert repr(Extent(["my-dim", "ok_1"], [3, 1])) == '{"my-dim": 3, ok_1: 1}'


def test_extent_empty_repr_is_braces() -> None:
    e = Extent([], [])
    assert repr(e) == "{}"
    assert e.nelements == 1
    assert len(e) == 0


def test_extent_unknown_label_raises_dimension_not_found() -> None:
    e = Extent(["hosts"], [2])
    with pytest.raises(DimensionNotFound) as info:
        e["x"]
    assert str(info.value) == "Dimension 'x' not found"
    with pytest.raises(ValueError, match="Dimension 'x' not found"):
        e["x"]
    with pytest.raises(KeyError):
        e["x"]


def test_extent_unhashable_label_raises_dimension_not_found() -> None:
    with pytest.raises(DimensionNotFound):
        Extent(["hosts"], [2])[["hosts"]]  # type: ignore[index]


def test_extent_equality_is_ordered_and_hashable() -> None:
    a = Extent(["hosts", "gpus"], [2, 4])
    assert a == Extent(("hosts", "gpus"), (2, 4))
    assert hash(a) == hash(Extent(["hosts", "gpus"], [2, 4]))
    assert a != Extent(["gpus", "hosts"], [4, 2])
    assert a != Extent(["hosts", "gpus"], [2, 3])
    assert a != {"hosts": 2, "gpus": 4}


def test_extent_pickle_round_trips() -> None:
    e = Extent(["hosts", "gpus"], [2, 4])
    assert pickle.loads(pickle.dumps(e)) == e


def test_extent_region_is_row_major() -> None:
    region = Extent(["hosts", "gpus"], [2, 3]).region
    assert region == Region(["hosts", "gpus"], Slice.new_row_major([2, 3]))
    assert region.labels == ["hosts", "gpus"]
    assert region.sizes == [2, 3]
    assert region.ranks() == list(range(6))
    assert len(region) == 6


def test_extent_string_labels_raise_type_error() -> None:
    with pytest.raises(TypeError, match="Can't extract `str` to `Vec`"):
        Extent("hosts", [2])


def test_extent_non_string_label_raises_type_error() -> None:
    with pytest.raises(TypeError, match="not a string"):
        Extent([1], [2])  # type: ignore[list-item]


def test_extent_duplicate_labels_raise_value_error() -> None:
    with pytest.raises(ValueError, match="repeat a name"):
        Extent(["a", "a"], [1, 2])


def test_extent_length_mismatch_raises_value_error() -> None:
    with pytest.raises(ValueError, match="^label/sizes dimension mismatch: 2 != 1$"):
        Extent(["a", "b"], [1])


def test_extent_negative_size_raises_overflow_error_as_monarch() -> None:
    with pytest.raises(OverflowError, match="can't convert negative int to unsigned"):
        Extent(["a"], [-1])


# -- Point --------------------------------------------------------------------------------------


def test_point_str_matches_monarch_worked_fact() -> None:
    p = Point(1, Extent(["hosts", "gpus"], [1, 2]))
    assert str(p) == "{'hosts': 0/1, 'gpus': 1/2}"
    assert repr(p) == "{'hosts': 0/1, 'gpus': 1/2}"


def test_point_coordinates_are_row_major() -> None:
    e = Extent(["hosts", "gpus"], [4, 3])
    p = Point(7, e)
    assert p.rank == 7
    assert p.extent == e
    assert (p["hosts"], p["gpus"]) == (2, 1)
    assert dict(p) == {"hosts": 2, "gpus": 1}
    assert len(p) == 2
    assert p.size("gpus") == 3


def test_point_double_star_unpacks_coordinates() -> None:
    def take(**coords: int) -> dict[str, int]:
        return coords

    assert take(**Point(5, Extent(["a", "b"], [2, 3]))) == {"a": 1, "b": 2}


def test_point_zero_dim_repr_is_braces() -> None:
    p = Point(0, Extent([], []))
    assert repr(p) == "{}"
    assert dict(p) == {}


def test_point_unknown_label_raises_dimension_not_found() -> None:
    p = Point(0, Extent(["hosts"], [2]))
    with pytest.raises(DimensionNotFound, match="Dimension 'x' not found"):
        p["x"]
    with pytest.raises(DimensionNotFound, match="Dimension 'x' not found"):
        p.size("x")
    assert "x" not in p


def test_point_rank_out_of_range_raises_value_error() -> None:
    e = Extent(["hosts"], [2])
    with pytest.raises(ValueError, match="^out of range: total ranks 2; does not contain rank 2$"):
        Point(2, e)
    with pytest.raises(OverflowError, match="can't convert negative int to unsigned"):
        Point(-1, e)


def test_point_mapping_extent_raises_type_error_as_monarch() -> None:
    with pytest.raises(TypeError, match="'dict' object cannot be cast as 'Extent'"):
        Point(1, {"a": 2})  # type: ignore[arg-type]


def test_point_non_mapping_extent_raises_type_error() -> None:
    with pytest.raises(TypeError, match="'list' object cannot be cast as 'Extent'"):
        Point(0, [2])  # type: ignore[arg-type]


def test_point_equality_uses_rank_and_extent() -> None:
    e = Extent(["a"], [3])
    assert Point(1, e) == Point(1, Extent(["a"], [3]))
    assert hash(Point(1, e)) == hash(Point(1, Extent(["a"], [3])))
    assert Point(1, e) != Point(2, e)
    assert Point(0, Extent(["a"], [3])) != Point(0, Extent(["a"], [4]))
    assert Point(0, e) != {"a": 0}


def test_point_pickle_round_trips() -> None:
    p = Point(3, Extent(["hosts", "gpus"], [2, 2]))
    q = pickle.loads(pickle.dumps(p))
    assert q == p
    assert str(q) == "{'hosts': 1/2, 'gpus': 1/2}"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), max_size=4), st.data())
def test_point_coordinates_round_trip_to_rank(sizes: list[int], data: st.DataObject) -> None:
    labels = [f"d{i}" for i in range(len(sizes))]
    extent = Extent(labels, sizes)
    rank = data.draw(st.integers(0, extent.nelements - 1))
    point = Point(rank, extent)
    assert extent.region.slice().nditem([point[label] for label in labels]) == rank


# -- Region -------------------------------------------------------------------------------------


def test_region_equality_hash_and_pickle() -> None:
    r = Region(["a", "b"], Slice(offset=1, sizes=[2, 2], strides=[6, 1]))
    assert r == Region(("a", "b"), Slice(offset=1, sizes=[2, 2], strides=[6, 1]))
    assert hash(r) == hash(pickle.loads(pickle.dumps(r)))
    assert pickle.loads(pickle.dumps(r)) == r
    assert r != Region(["a", "c"], r.slice())
    assert r != "region"
    # Monarch's Region is a Rust object with the default repr under its binding's path.
    binding = "monarch._rust_bindings.monarch_hyperactor.shape"
    assert repr(r) == f"<{binding}.Region object at {id(r):#x}>"


def test_region_as_shape_and_point_of_base_rank() -> None:
    r = Region(["a", "b"], Slice(offset=1, sizes=[2, 3], strides=[6, 1]))
    assert r.as_shape() == Shape(["a", "b"], r.slice())
    assert repr(r.point_of_base_rank(8)) == "{'a': 1/2, 'b': 1/3}"
    with pytest.raises(ValueError, match="this base rank 4 does not belong to this region"):
        r.point_of_base_rank(4)


def test_region_label_count_mismatch_raises_value_error() -> None:
    with pytest.raises(ValueError, match="one label per dimension"):
        Region(["a"], Slice.new_row_major([1, 2]))


def test_region_bad_labels_raise() -> None:
    with pytest.raises(TypeError, match="sequence of strings"):
        Region("ab", Slice.new_row_major([1, 2]))
    with pytest.raises(ValueError, match="repeat a name"):
        Region(["a", "a"], Slice.new_row_major([1, 2]))
