"""Unit tests for the mesh protocol: `MeshTrait` and the shape operations behind it."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings, strategies as st

from monarch._src.shape import Extent, MeshTrait, Shape, Slice
from monarch._src.shape.ops import flatten_shape, rename_shape, slice_shape, split_shape


class RankMesh(MeshTrait):
    """The smallest mesh: nothing but a shape. Stands in for host/proc/actor meshes."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape

    @property
    def _shape(self) -> Shape:
        return self.shape

    def _new_with_shape(self, shape: Shape) -> RankMesh:
        return RankMesh(shape)

    def ranks(self) -> list[int]:
        return self.shape.ranks()


def _mesh(**sizes: int) -> RankMesh:
    return RankMesh(Shape(list(sizes), Slice.new_row_major(list(sizes.values()))))


# -- MeshTrait basics ---------------------------------------------------------------------------


def test_mesh_trait_without_hooks_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError):
        MeshTrait()  # type: ignore[abstract]


class PairMesh(MeshTrait):
    """A mesh written for torchmonarch: `_ndslice` and `_labels`, no `_shape` property."""

    def __init__(self, labels: list[str], ndslice: Slice) -> None:
        self.labels, self.ndslice = labels, ndslice

    @property
    def _ndslice(self) -> Slice:
        return self.ndslice

    @property
    def _labels(self) -> tuple[str, ...]:
        return tuple(self.labels)

    def _new_with_shape(self, shape: Shape) -> PairMesh:
        return PairMesh(list(shape.labels), shape.ndslice)


class NoShapeMesh(MeshTrait):
    def _new_with_shape(self, shape: Shape) -> NoShapeMesh:
        return self


def test_mesh_trait_takes_torchmonarchs_pair_or_a_shape() -> None:
    pair = PairMesh(["hosts", "gpus"], Slice.new_row_major([2, 3]))
    assert len(pair) == 6 and pair.sizes == {"hosts": 2, "gpus": 3}
    assert pair.slice(gpus=1)._labels == ("hosts",)
    assert list(pair.slice(gpus=1)._ndslice) == [1, 4]
    ours = _mesh(hosts=2, gpus=3)  # the pair derives from its `_shape`
    assert ours._labels == ("hosts", "gpus") and ours._ndslice == ours.shape.ndslice
    with pytest.raises(TypeError, match="NoShapeMesh is a MeshTrait without a shape"):
        len(NoShapeMesh())


def test_mesh_trait_sizes_extent_len_report_shape() -> None:
    m = _mesh(hosts=4, gpus=3)
    assert m.sizes == {"hosts": 4, "gpus": 3}
    assert m.extent == Extent(["hosts", "gpus"], [4, 3])
    assert len(m) == 12


def test_mesh_trait_size_total_single_and_product() -> None:
    m = _mesh(hosts=4, gpus=3, nic=2)
    assert m.size() == 24
    assert m.size("gpus") == 3
    assert m.size(["hosts", "nic"]) == 8
    assert m.size(()) == 1


def test_mesh_trait_size_unknown_dim_raises_key_error() -> None:
    m = _mesh(hosts=4)
    # Monarch's message names the mesh by its str().
    with pytest.raises(KeyError, match=re.escape(f"{m} does not have dimension 'x'")):
        m.size("x")
    with pytest.raises(KeyError, match="does not have dimension 'x'"):
        m.size(["hosts", "x"])


# -- slice --------------------------------------------------------------------------------------


def test_mesh_slice_integer_drops_dimension() -> None:
    m = _mesh(hosts=4, gpus=3).slice(gpus=0)
    assert m.sizes == {"hosts": 4}
    assert m.ranks() == [0, 3, 6, 9]


def test_mesh_slice_range_keeps_dimension() -> None:
    m = _mesh(hosts=2, gpus=8).slice(gpus=slice(0, 4))
    assert m.sizes == {"hosts": 2, "gpus": 4}


def test_mesh_slice_step_and_int_picks_hosts_0_and_2() -> None:
    m = _mesh(hosts=4, gpus=3).slice(hosts=slice(0, 3, 2), gpus=0)
    assert m.sizes == {"hosts": 2}
    assert m.ranks() == [0, 6]


def test_mesh_slice_worked_fact_covers_global_1_2_7_8() -> None:
    m = _mesh(hosts=4, gpus=3).slice(hosts=slice(0, 4, 2), gpus=slice(1, 3))
    assert m.shape.ndslice == Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    assert m.ranks() == [1, 2, 7, 8]


def test_mesh_slice_of_slice_keeps_global_ranks() -> None:
    m = _mesh(hosts=4, gpus=3).slice(hosts=slice(1, 4)).slice(hosts=1, gpus=slice(1, 3))
    assert m.ranks() == [7, 8]


def test_mesh_slice_all_dims_gives_zero_dim_mesh() -> None:
    m = _mesh(hosts=4, gpus=3).slice(hosts=2, gpus=1)
    assert m.sizes == {}
    assert len(m) == 1
    assert m.ranks() == [7]


def test_mesh_slice_by_point_selects_that_point() -> None:
    from monarch._src.shape import Point

    m = _mesh(hosts=2, gpus=3)
    assert m.slice(**Point(4, m.extent)).ranks() == [4]


def test_mesh_slice_unknown_label_raises_type_error() -> None:
    with pytest.raises(TypeError) as info:
        _mesh(hosts=2).slice(x=0)
    assert str(info.value) == "Shape does not have dimension labeled 'x'"


def test_mesh_slice_checks_each_dimension_in_keyword_order() -> None:
    with pytest.raises(IndexError, match="index out of range"):
        _mesh(hosts=2).slice(hosts=5, x=0)
    with pytest.raises(TypeError, match="dimension labeled 'x'"):
        _mesh(hosts=2).slice(x=0, hosts=5)


@pytest.mark.parametrize("index", [2, 10, -1, -2])
def test_mesh_slice_integer_out_of_range_raises_index_error(index: int) -> None:
    with pytest.raises(IndexError) as info:
        _mesh(hosts=2).slice(hosts=index)
    assert str(info.value) == "index out of range"


def test_mesh_slice_non_int_selector_raises_monarchs_type_errors() -> None:
    with pytest.raises(TypeError, match="'<' not supported between instances of 'str' and 'int'"):
        _mesh(hosts=2).slice(hosts="0")  # type: ignore[arg-type]
    match = "argument 'index': 'float' object cannot be interpreted as an integer"
    with pytest.raises(TypeError, match=match):
        _mesh(hosts=2).slice(hosts=1.0)  # type: ignore[arg-type]


def test_mesh_slice_zero_step_raises_value_error() -> None:
    with pytest.raises(ValueError):
        _mesh(hosts=2).slice(hosts=slice(0, 2, 0))


def test_mesh_slice_returns_same_type() -> None:
    assert type(_mesh(hosts=2).slice(hosts=0)) is RankMesh


# -- split --------------------------------------------------------------------------------------


def test_mesh_split_infers_one_size_per_dim() -> None:
    m = _mesh(host=32, gpu=8).split(host=("dp", "pp"), gpu=("tp", "cp"), pp=16, cp=2)
    assert m.sizes == {"dp": 2, "pp": 16, "tp": 4, "cp": 2}
    assert m.ranks() == list(range(256))


def test_mesh_split_keeps_unmentioned_dims() -> None:
    m = _mesh(a=2, host=6).split(host=("x", "y"), x=3)
    assert m.sizes == {"a": 2, "x": 3, "y": 2}


def test_mesh_split_of_sparse_keeps_global_ranks() -> None:
    m = _mesh(hosts=4, gpus=3).slice(gpus=1).split(hosts=("a", "b"), b=2)
    assert m.sizes == {"a": 2, "b": 2}
    assert m.ranks() == [1, 4, 7, 10]


def test_mesh_split_swap_names_via_single_tuples() -> None:
    m = _mesh(a=2, b=3).split(a=("b",), b=("a",))
    assert m.sizes == {"b": 2, "a": 3}


def test_mesh_split_all_sizes_given_and_matching_is_accepted() -> None:
    assert _mesh(h=6).split(h=("x", "y"), x=2, y=3).sizes == {"x": 2, "y": 3}


def test_mesh_split_two_unknown_sizes_raise_cannot_infer() -> None:
    with pytest.raises(ValueError, match=r"^Cannot infer size "):
        _mesh(host=8).split(host=("dp", "pp"))


def test_mesh_split_unused_constraint_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^unused size constraints"):
        _mesh(host=8).split(host=("dp", "pp"), pp=2, zz=3)


def test_mesh_split_duplicate_name_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^Duplicate dimension name 'gpu'"):
        _mesh(host=8, gpu=2).split(host=("dp", "gpu"), dp=4)


def test_mesh_split_duplicate_name_within_tuple_raises_value_error() -> None:
    with pytest.raises(ValueError, match="Duplicate dimension name 'x'"):
        _mesh(host=4).split(host=("x", "x"), x=2)


def test_mesh_split_uneven_division_raises_value_error() -> None:
    with pytest.raises(ValueError, match="is not evenly divided by"):
        _mesh(host=8).split(host=("dp", "pp"), pp=3)


def test_mesh_split_known_sizes_product_mismatch_raises_value_error() -> None:
    match = re.escape(
        "Dimension 'host' of size 8 is not evenly divided by ('dp', 'pp') with sizes (2, 2)"
    )
    with pytest.raises(ValueError, match=match):
        _mesh(host=8).split(host=("dp", "pp"), dp=2, pp=2)


def test_mesh_split_string_instead_of_tuple_raises_value_error() -> None:
    with pytest.raises(ValueError, match="^expected a sequence of dimensions, but got 'dp'$"):
        _mesh(host=8).split(host="dp")


def test_mesh_split_int_for_existing_dim_raises_type_error() -> None:
    with pytest.raises(TypeError, match="not iterable"):
        _mesh(host=8).split(host=2)  # type: ignore[arg-type]


def test_mesh_split_non_int_constraint_raises_value_error() -> None:
    match = "^'pp' is not an existing dim. Expected an integer size constraint on a new dim.$"
    with pytest.raises(ValueError, match=match):
        _mesh(host=8).split(host=("dp", "pp"), pp="2")


def test_mesh_split_non_positive_constraint_raises_value_error() -> None:
    with pytest.raises(ValueError, match="is not evenly divided by"):
        _mesh(host=8).split(host=("dp", "pp"), pp=0)


def test_mesh_split_empty_tuple_raises_value_error() -> None:
    with pytest.raises(ValueError, match=re.escape("not evenly divided by () with sizes ()")):
        _mesh(host=8).split(host=())


def test_mesh_split_two_unknown_sizes_raises_value_error() -> None:
    match = re.escape(
        "Cannot infer size of ('dp', 'pp') because both pp and dp have unknown size. "
        "Specify at least one as argument, e.g. pp=4"
    )
    with pytest.raises(ValueError, match=match):
        _mesh(host=8).split(host=("dp", "pp"))


# -- rename -------------------------------------------------------------------------------------


def test_mesh_rename_changes_only_mentioned_labels() -> None:
    m = _mesh(host=2, gpu=3).rename(host="dp")
    assert m.sizes == {"dp": 2, "gpu": 3}
    assert m.ranks() == list(range(6))


def test_mesh_rename_swap_is_allowed() -> None:
    assert _mesh(a=2, b=3).rename(a="b", b="a").sizes == {"b": 2, "a": 3}


def test_mesh_rename_unknown_label_raises_value_error() -> None:
    with pytest.raises(ValueError, match="'x' is not an existing dim"):
        _mesh(host=2).rename(x="y")


def test_mesh_rename_to_existing_label_raises_duplicate() -> None:
    with pytest.raises(ValueError, match="Duplicate dimension name 'gpu'"):
        _mesh(host=2, gpu=3).rename(host="gpu")


def test_mesh_rename_non_string_raises_type_error() -> None:
    with pytest.raises(TypeError, match="is not a string"):
        _mesh(host=2).rename(host=3)  # type: ignore[arg-type]


# -- flatten ------------------------------------------------------------------------------------


def test_mesh_flatten_dense_gives_one_dim() -> None:
    m = _mesh(hosts=2, gpus=3).flatten("rank")
    assert m.sizes == {"rank": 6}
    assert m.ranks() == list(range(6))


def test_mesh_flatten_rank_zero_idiom_picks_first_rank() -> None:
    m = _mesh(hosts=2, gpus=3).slice(hosts=1).flatten("rank").slice(rank=0)
    assert m.ranks() == [3]
    assert m.sizes == {}


def test_mesh_flatten_zero_dim_gives_size_one() -> None:
    assert _mesh(hosts=2).slice(hosts=1).flatten("r").sizes == {"r": 1}


def test_mesh_flatten_sparse_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"^cannot flatten sparse mesh: "):
        _mesh(hosts=4, gpus=3).slice(gpus=0).flatten("r")
    with pytest.raises(ValueError, match=r"^cannot flatten sparse mesh: "):
        _mesh(hosts=4, gpus=3).slice(hosts=slice(0, 4, 2)).flatten("r")


def test_mesh_flatten_non_string_name_raises_type_error() -> None:
    with pytest.raises(TypeError, match="is not a string"):
        _mesh(hosts=2).flatten(3)  # type: ignore[arg-type]


def test_mesh_flatten_row_slice_of_dense_is_allowed() -> None:
    m = _mesh(hosts=4, gpus=3).slice(hosts=slice(1, 3)).flatten("r")
    assert m.ranks() == [3, 4, 5, 6, 7, 8]


# -- properties ---------------------------------------------------------------------------------

_LABELS = ["a", "b", "c", "d"]

selectors = st.one_of(
    st.integers(-1, 5),
    st.builds(
        slice,
        st.one_of(st.none(), st.integers(-6, 6)),
        st.one_of(st.none(), st.integers(-6, 6)),
        st.one_of(st.none(), st.integers(1, 3)),
    ),
)


@st.composite
def sliced_meshes(draw: st.DrawFn) -> tuple[list[int], dict[str, int | slice]]:
    sizes = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    labels = _LABELS[: len(sizes)]
    chosen = draw(st.lists(st.sampled_from(labels), unique=True)) if labels else []
    return sizes, {label: draw(selectors) for label in chosen}


@settings(max_examples=100, deadline=None)
@given(sliced_meshes())
def test_mesh_slice_iteration_equals_filtering_dense_ranks(
    case: tuple[list[int], dict[str, int | slice]],
) -> None:
    sizes, selection = case
    labels = _LABELS[: len(sizes)]
    mesh = RankMesh(Shape(labels, Slice.new_row_major(sizes)))
    out_of_range = any(
        not isinstance(sel, slice) and not 0 <= sel < sizes[labels.index(label)]
        for label, sel in selection.items()
    )
    per_dim: list[range | list[int]] = []
    for label, size in zip(labels, sizes):
        sel = selection.get(label, slice(None))
        per_dim.append(range(size)[sel] if isinstance(sel, slice) else [sel])
    # Out-of-range indices, empty ranges and stepped selections whose strides do not nest are
    # refused, as Monarch refuses them; dimensions are checked in keyword order, so with several
    # bad selectors any of their errors may come first.
    empty = any(len(kept) == 0 for kept in per_dim)
    stepped = any(isinstance(sel, slice) and (sel.step or 1) > 1 for sel in selection.values())
    try:
        result = mesh.slice(**selection)
    except IndexError as exc:
        assert out_of_range and str(exc) == "index out of range"
        return
    except ValueError as exc:
        text = str(exc)
        if text.startswith("empty range "):
            assert empty
        else:
            assert stepped
            assert text == "nonrectangular shape" or "larger than size of previous" in text
        return
    assert not out_of_range and not empty
    strides = Slice.new_row_major(sizes).strides
    expected = [
        sum(c * s for c, s in zip(coords, strides)) for coords in itertools.product(*per_dim)
    ]
    assert result.ranks() == expected
    kept = [label for label in labels if isinstance(selection.get(label, slice(None)), slice)]
    assert list(result.sizes) == kept


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.data())
def test_mesh_split_then_flatten_round_trips(sizes: list[int], data: st.DataObject) -> None:
    labels = _LABELS[: len(sizes)]
    mesh = RankMesh(Shape(labels, Slice.new_row_major(sizes)))
    dim = data.draw(st.sampled_from(labels))
    inner = data.draw(st.sampled_from([d for d in range(1, 7) if mesh.size(dim) % d == 0]))
    split = mesh.split(**{dim: ("outer_x", "inner_x")}, inner_x=inner)
    assert split.ranks() == mesh.ranks()
    assert split.size() == mesh.size()
    assert split.size("inner_x") == inner
    assert split.flatten("r").shape == mesh.flatten("r").shape
    merged = split.split(outer_x=("outer_x",)).rename(outer_x="o")
    assert merged.ranks() == mesh.ranks()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(0, 3))
def test_mesh_slice_then_split_keeps_rank_order(sizes: list[int], pick: int) -> None:
    labels = _LABELS[: len(sizes)]
    mesh = RankMesh(Shape(labels, Slice.new_row_major(sizes)))
    pick = min(pick, sizes[0] - 1)  # a selection must keep at least one index
    sliced = mesh.slice(**{labels[0]: slice(pick, None, 2)})
    renamed = sliced.split(**{labels[-1]: ("z",)})
    assert renamed.ranks() == sliced.ranks()


# -- the pure functions directly ----------------------------------------------------------------


def test_shape_ops_functions_do_not_mutate_input() -> None:
    shape = Shape(["h", "g"], Slice.new_row_major([2, 4]))
    before = (shape.labels, shape.ndslice)
    slice_shape(shape, h=1)
    split_shape(shape, g=("x", "y"), y=2)
    rename_shape(shape, h="hh")
    flatten_shape(shape, "r")
    assert (shape.labels, shape.ndslice) == before
