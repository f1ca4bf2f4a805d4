"""Unit tests for `ValueMesh`: values over a mesh shape, with the mesh protocol."""

from __future__ import annotations

import pickle
import pprint
import re
import textwrap
import types

import pytest
from hypothesis import given, settings, strategies as st

from monarch._src.mesh.value_mesh import ValueMesh
from monarch._src.shape import Extent, MeshTrait, Point, Shape, Slice


def _vm(**sizes: int) -> ValueMesh[int]:
    shape = Shape(list(sizes), Slice.new_row_major(list(sizes.values())))
    return ValueMesh(shape, [10 * i for i in range(len(shape))])


def test_value_mesh_is_a_mesh() -> None:
    assert isinstance(_vm(gpus=2), MeshTrait)


def test_value_mesh_len_values_and_get() -> None:
    vm = _vm(hosts=2, gpus=3)
    assert len(vm) == 6
    assert vm.values() == [0, 10, 20, 30, 40, 50]
    assert vm.get(4) == 40
    with pytest.raises(OverflowError, match="can't convert negative int to unsigned"):
        vm.get(-1)


def test_value_mesh_get_out_of_range_raises_value_error_as_monarch() -> None:
    with pytest.raises(ValueError, match=re.escape("index 2 out of range (len=2)")):
        _vm(gpus=2).get(2)


def test_value_mesh_values_is_a_copy() -> None:
    vm = _vm(gpus=2)
    vm.values().append(99)
    assert vm.values() == [0, 10]


def test_value_mesh_items_yield_points_in_row_major_order() -> None:
    vm = _vm(hosts=4, gpus=3)
    items = list(vm.items())
    assert [point.rank for point, _ in items] == list(range(12))
    assert all(point.extent == Extent(["hosts", "gpus"], [4, 3]) for point, _ in items)
    assert items[5] == (Point(5, vm.extent), 50)
    assert dict(items[5][0]) == {"hosts": 1, "gpus": 2}
    assert list(vm) == items


def test_value_mesh_extent_labels_and_sizes() -> None:
    vm = _vm(hosts=4, gpus=3)
    assert vm.extent.labels == ["hosts", "gpus"]
    assert vm.extent.sizes == [4, 3]
    assert vm.sizes == {"hosts": 4, "gpus": 3}
    assert vm.size("gpus") == 3


def test_value_mesh_item_with_all_coordinates() -> None:
    vm = _vm(hosts=2, gpus=2)
    assert vm.item(hosts=0, gpus=1) == 10
    assert vm.item(gpus=0, hosts=1) == 20
    assert vm.slice(hosts=0, gpus=1).item() == 10


def test_value_mesh_item_missing_dimension_raises_key_error() -> None:
    with pytest.raises(KeyError) as info:
        _vm(hosts=2, gpus=2).item(hosts=0)
    assert info.value.args == ("gpus",)


def test_value_mesh_item_no_args_on_dimensional_mesh_names_first_dimension() -> None:
    with pytest.raises(KeyError) as info:
        _vm(hosts=2, gpus=2).item()
    assert info.value.args == ("hosts",)


def test_value_mesh_item_extra_dimension_raises_key_error() -> None:
    with pytest.raises(KeyError, match="item has extra dimensions: \\['x'\\]"):
        _vm(gpus=2).item(gpus=0, x=1)


def test_value_mesh_item_out_of_range_raises_index_error() -> None:
    with pytest.raises(IndexError, match="^rank 2 not in current shape$"):
        _vm(gpus=2).item(gpus=2)
    with pytest.raises(IndexError, match="^rank 3 not in current shape$"):
        _vm(hosts=2, gpus=2).item(hosts=0, gpus=3)
    with pytest.raises(OverflowError):
        _vm(gpus=2).item(gpus=-1)


def test_value_mesh_item_zero_dim_returns_single_value() -> None:
    vm = ValueMesh(Shape.unity(), ["only"])
    assert vm.item() == "only"
    assert len(vm) == 1
    assert repr(vm.extent) == "{}"


def test_value_mesh_flatten_slice_item_reads_rank_string() -> None:
    extent = Extent(["hosts", "gpus"], [1, 2])
    shape = Shape(extent.labels, Slice.new_row_major(extent.sizes))
    vm = ValueMesh(shape, [str(Point(rank, extent)) for rank in range(2)])
    assert vm.flatten("r").slice(r=1).item() == "{'hosts': 0/1, 'gpus': 1/2}"


def test_value_mesh_slice_restricts_values() -> None:
    vm = _vm(hosts=4, gpus=3)
    sub = vm.slice(hosts=slice(0, 3, 2), gpus=0)
    assert isinstance(sub, ValueMesh)
    assert sub.sizes == {"hosts": 2}
    assert sub.values() == [0, 60]
    assert [point.rank for point, _ in sub] == [0, 1]


def test_value_mesh_worked_fact_slice_keeps_values_of_global_1_2_7_8() -> None:
    vm = _vm(hosts=4, gpus=3)
    sub = vm.slice(hosts=slice(0, 4, 2), gpus=slice(1, 3))
    assert sub._shape.ndslice == Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    assert sub.values() == [10, 20, 70, 80]
    assert sub.item(hosts=1, gpus=0) == 70


def test_value_mesh_slice_of_slice_restricts_values() -> None:
    vm = _vm(hosts=4, gpus=3).slice(hosts=slice(1, 4)).slice(hosts=1, gpus=slice(1, 3))
    assert vm.values() == [70, 80]


def test_value_mesh_over_sparse_shape_maps_values_by_position() -> None:
    shape = Shape(["hosts", "gpus"], Slice(offset=1, sizes=[2, 2], strides=[6, 1]))
    vm = ValueMesh(shape, ["a", "b", "c", "d"])
    assert vm.slice(gpus=1).values() == ["b", "d"]


def test_value_mesh_flatten_rename_split_keep_values() -> None:
    vm = _vm(hosts=2, gpus=2)
    assert vm.flatten("r").values() == vm.values()
    assert vm.rename(hosts="h").values() == vm.values()
    assert vm.rename(hosts="h").sizes == {"h": 2, "gpus": 2}
    split = vm.split(gpus=("a", "b"), b=1)
    assert split.values() == vm.values()
    assert split.item(hosts=1, a=1, b=0) == 30


def test_value_mesh_flatten_sparse_raises_value_error() -> None:
    with pytest.raises(ValueError, match="^cannot flatten sparse mesh: "):
        _vm(hosts=2, gpus=2).slice(gpus=0).flatten("r")


def test_value_mesh_slice_unknown_label_raises_type_error() -> None:
    with pytest.raises(TypeError, match="Shape does not have dimension labeled 'x'"):
        _vm(gpus=2).slice(x=0)


def test_value_mesh_value_count_mismatch_raises_value_error() -> None:
    match = "^invalid value mesh: expected 2 ranks, but contains 1 ranks$"
    with pytest.raises(ValueError, match=match):
        ValueMesh(Shape(["gpus"], Slice.new_row_major([2])), [1])


def test_value_mesh_non_shape_raises_type_error() -> None:
    with pytest.raises(TypeError, match="needs a Shape"):
        ValueMesh(Extent(["gpus"], [2]), [1, 2])  # type: ignore[arg-type]


def test_value_mesh_repr_matches_monarch_format() -> None:
    vm = ValueMesh(Shape(["gpus"], Slice.new_row_major([2])), ["a", "b"])
    # Monarch's form: the pformat of a tuple of (point, value) pairs, indented two spaces.
    assert repr(vm) == "ValueMesh({gpus: 2}):\n  (({'gpus': 0/2}, 'a'), ({'gpus': 1/2}, 'b'))"
    big = _vm(hosts=4, gpus=3)
    body = textwrap.indent(pprint.pformat(tuple(big.items())), "  ")
    assert repr(big) == "ValueMesh({hosts: 4, gpus: 3}):\n" + body
    assert repr(big).splitlines()[2] == "   ({'hosts': 0/4, 'gpus': 1/3}, 10),"
    assert str(big) == repr(big)
    assert repr(ValueMesh(Shape.unity(), [5])) == "ValueMesh({}):\n  (({}, 5),)"


def test_value_mesh_items_is_a_generator_and_iter_matches() -> None:
    vm = _vm(gpus=2)
    assert isinstance(vm.items(), types.GeneratorType)
    assert list(vm) == list(vm.items())


def test_value_mesh_from_indexed_orders_pairs_by_rank() -> None:
    shape = Shape(["gpus"], Slice.new_row_major([3]))
    assert ValueMesh.from_indexed(shape, [(2, "c"), (0, "a"), (1, "b")]).values() == ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"no value for ranks \[1\]"):
        ValueMesh.from_indexed(shape, [(0, "a"), (2, "c")])
    # A rank given twice keeps its last value, as on Monarch.
    assert ValueMesh.from_indexed(shape, [(0, "a"), (1, "b"), (0, "z"), (2, "c")]).values() == [
        "z", "b", "c"]


def test_value_mesh_pickle_round_trips() -> None:
    vm = _vm(hosts=2, gpus=3).slice(gpus=slice(1, 3))
    copy = pickle.loads(pickle.dumps(vm))
    assert list(copy.items()) == list(vm.items())
    assert copy._shape == vm._shape
    assert copy.item(hosts=1, gpus=0) == 40


def test_value_mesh_from_global_ranks_orders_by_shape() -> None:
    shape = Shape(["hosts"], Slice(offset=1, sizes=[2], strides=[6]))
    vm = ValueMesh._from_global_ranks(shape, {7: "second", 1: "first", 3: "unused"})
    assert vm.values() == ["first", "second"]


def test_value_mesh_from_global_ranks_missing_rank_raises_value_error() -> None:
    shape = Shape(["hosts"], Slice(offset=1, sizes=[2], strides=[6]))
    with pytest.raises(ValueError, match=r"no value for global ranks \[7\]"):
        ValueMesh._from_global_ranks(shape, {1: "first"})


def test_value_mesh_new_with_foreign_shape_raises_value_error() -> None:
    vm = _vm(gpus=2)
    with pytest.raises(ValueError, match="no value for"):
        vm._new_with_shape(Shape(["gpus"], Slice(offset=5, sizes=[1], strides=[1])))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_value_mesh_item_agrees_with_items(sizes: list[int], data: st.DataObject) -> None:
    labels = [f"d{i}" for i in range(len(sizes))]
    shape = Shape(labels, Slice.new_row_major(sizes))
    vm = ValueMesh(shape, list(range(len(shape))))
    for point, value in vm:
        assert vm.item(**point) == value
        assert vm.slice(**point).item() == value
    label = data.draw(st.sampled_from(labels))
    index = data.draw(st.integers(0, sizes[labels.index(label)] - 1))
    sub = vm.slice(**{label: index})
    assert sub.values() == [v for p, v in vm if p[label] == index]


def test_value_mesh_indexing_raises_monarchs_type_error() -> None:
    match = re.escape("'monarch._src.actor.actor_mesh.ValueMesh' object is not subscriptable")
    with pytest.raises(TypeError, match=match):
        _vm(gpus=2)[0]  # type: ignore[index]


def test_value_mesh_is_a_value_with_no_other_attributes_and_plain_subscript() -> None:
    vm = _vm(hosts=1, gpus=2)
    with pytest.raises(AttributeError):
        vm._extra = 1  # type: ignore[attr-defined]
    assert ValueMesh[int] is ValueMesh  # as on Monarch: the class itself at run time
    assert pickle.loads(pickle.dumps(vm)).values() == vm.values()
