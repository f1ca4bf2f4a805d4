"""Unit tests for `Slice` (NDSlice): strided sets of global ranks."""

from __future__ import annotations

import itertools
import pickle

import pytest
from hypothesis import given, settings, strategies as st

from monarch._src.shape import NDSlice, Slice
from monarch._src.shape.slice import row_major_strides


def _brute_force(offset: int, sizes: list[int], strides: list[int]) -> list[int]:
    return [
        offset + sum(c * s for c, s in zip(coords, strides))
        for coords in itertools.product(*(range(n) for n in sizes))
    ]


@st.composite
def nested_slices(draw: st.DrawFn) -> Slice:
    """Slices as meshes produce them: row-major-ish, possibly sparse, possibly transposed."""
    ndim = draw(st.integers(0, 4))
    sizes = [draw(st.integers(1, 4)) for _ in range(ndim)]
    # Strides innermost first: each a multiple of the last that covers its span (the layouts
    # Monarch accepts), with gaps so the slice can be sparse.
    strides_inner_first: list[int] = []
    span = draw(st.integers(1, 3))
    for size in reversed(sizes):
        stride = span * draw(st.integers(1, 3))
        strides_inner_first.append(stride)
        span = stride * size
    strides = list(reversed(strides_inner_first))
    if draw(st.booleans()) and ndim > 1:
        order = draw(st.permutations(range(ndim)))
        sizes = [sizes[d] for d in order]
        strides = [strides[d] for d in order]
    return Slice(offset=draw(st.integers(0, 20)), sizes=sizes, strides=strides)


# -- construction -----------------------------------------------------------------------------


def test_slice_keyword_constructor_exposes_fields() -> None:
    s = Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    assert (s.offset, s.sizes, s.strides, s.ndim) == (1, [2, 2], [6, 1], 2)


def test_slice_ndslice_alias_is_same_class() -> None:
    assert NDSlice is Slice


def test_slice_positional_arguments_raise_type_error() -> None:
    with pytest.raises(TypeError):
        Slice(0, [1], [1])  # type: ignore[call-arg]


def test_slice_mismatched_sizes_and_strides_raise_value_error() -> None:
    with pytest.raises(ValueError, match="^invalid dims: expected 2, got 1$"):
        Slice(offset=0, sizes=[2, 2], strides=[1])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"offset": -1, "sizes": [1], "strides": [1]},
        {"offset": 0, "sizes": [-1], "strides": [1]},
        {"offset": 0, "sizes": [1], "strides": [-1]},
    ],
)
def test_slice_negative_fields_raise_overflow_error_as_monarch(kwargs: dict[str, object]) -> None:
    with pytest.raises(OverflowError, match="can't convert negative int to unsigned"):
        Slice(**kwargs)  # type: ignore[arg-type]


def test_slice_non_integer_field_raises_type_error() -> None:
    with pytest.raises(TypeError, match="must be an integer"):
        Slice(offset=0, sizes=[1.5], strides=[1])  # type: ignore[list-item]


def test_slice_string_sizes_raise_type_error() -> None:
    with pytest.raises(TypeError, match="sequences of integers"):
        Slice(offset=0, sizes="12", strides=[1, 1])  # type: ignore[arg-type]


def test_slice_new_row_major_has_dense_strides() -> None:
    s = Slice.new_row_major([4, 3, 2])
    assert s == Slice(offset=0, sizes=[4, 3, 2], strides=[6, 2, 1])
    assert list(s) == list(range(24))


def test_row_major_strides_empty_sizes_returns_empty() -> None:
    assert row_major_strides([]) == []


# -- the worked fact of §2.5 --------------------------------------------------------------------


def test_slice_offset1_sizes22_strides61_covers_1_2_7_8() -> None:
    s = Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    assert list(s) == [1, 2, 7, 8]
    assert len(s) == 4
    assert [s[i] for i in range(4)] == [1, 2, 7, 8]
    assert [s.index(r) for r in (1, 2, 7, 8)] == [0, 1, 2, 3]
    assert s.coordinates(7) == [1, 0]
    assert s.nditem([1, 1]) == 8


# -- zero-dimensional and empty -----------------------------------------------------------------


def test_slice_zero_dim_has_length_one() -> None:
    s = Slice(offset=5, sizes=[], strides=[])
    assert len(s) == 1
    assert list(s) == [5]
    assert s[0] == 5
    assert s.index(5) == 0
    assert s.coordinates(5) == []
    assert s.nditem([]) == 5
    assert s.is_contiguous()


def test_slice_zero_size_dim_is_empty() -> None:
    s = Slice(offset=0, sizes=[3, 0], strides=[1, 3])
    assert len(s) == 0
    assert list(s) == []
    assert 0 not in s
    assert s.is_contiguous()
    with pytest.raises(IndexError):
        s[0]
    with pytest.raises(ValueError, match="not in"):
        s.index(0)


# -- lookups ------------------------------------------------------------------------------------


def test_slice_getitem_negative_position_is_a_type_error_as_monarch() -> None:
    s = Slice.new_row_major([2, 3])
    with pytest.raises(TypeError, match=r"position -1 is negative.*s\[len\(s\) - 1\]"):
        s[-1]
    assert s[len(s) - 1] == 5
    assert s[-2:] == (4, 5)  # a Python slice of positions may count from the end


def test_slice_getitem_out_of_range_raises_index_error() -> None:
    with pytest.raises(IndexError, match="^index 6 out of range 6$"):
        Slice.new_row_major([2, 3])[6]


def test_slice_index_absent_rank_raises_value_error() -> None:
    s = Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    for absent in (0, 3, 6, 9, 100):
        with pytest.raises(ValueError, match=f"^value {absent} not in slice$"):
            s.index(absent)
        assert absent not in s


def test_slice_contains_non_integer_returns_false() -> None:
    assert "a" not in Slice.new_row_major([2])


def test_slice_coordinates_absent_rank_raises_value_error() -> None:
    with pytest.raises(ValueError, match="not in"):
        Slice(offset=4, sizes=[2], strides=[2]).coordinates(5)


def test_slice_nditem_wrong_arity_raises_index_error() -> None:
    with pytest.raises(IndexError, match="^invalid dims: expected 2, got 1$"):
        Slice.new_row_major([2, 3]).nditem([1])


def test_slice_nditem_computes_without_bounds_check_as_monarch() -> None:
    # Monarch's nditem is the plain affine map; ValueMesh.item checks the result itself.
    assert Slice.new_row_major([2, 3]).nditem([1, 3]) == 6
    with pytest.raises(OverflowError):
        Slice.new_row_major([2, 3]).nditem([0, -1])


@pytest.mark.parametrize(
    ("sizes", "strides", "message"),
    [
        ([3, 2], [2, 3], "nonrectangular shape"),
        ([2, 2], [3, 2], "nonrectangular shape"),
        ([2, 2], [1, 1], "nonunique strides"),
        ([2], [0], "stride 0 must be larger than size of previous space 1"),
        ([2, 2], [3, 1], None),
        ([2, 1], [1, 1], None),
    ],
)
def test_slice_layout_is_checked_as_monarch(
    sizes: list[int], strides: list[int], message: str | None
) -> None:
    if message is None:
        assert len(list(Slice(offset=0, sizes=sizes, strides=strides))) == len(set(
            Slice(offset=0, sizes=sizes, strides=strides)))
        return
    with pytest.raises(ValueError, match=f"^{message}$"):
        Slice(offset=0, sizes=sizes, strides=strides)


def test_slice_new_row_major_with_zero_size_skips_the_layout_check() -> None:
    s = Slice.new_row_major([2, 0])
    assert s.strides == [0, 1]
    assert list(s) == []


def test_slice_transposed_strides_lookup_by_divmod() -> None:
    s = Slice(offset=0, sizes=[3, 2], strides=[1, 3])
    assert list(s) == [0, 3, 1, 4, 2, 5]
    assert s.coordinates(4) == [1, 1]
    assert s.index(4) == 3


# -- contiguity ---------------------------------------------------------------------------------


def test_slice_row_major_with_offset_is_contiguous() -> None:
    assert Slice(offset=3, sizes=[1, 3], strides=[3, 1]).is_contiguous()


def test_slice_size_one_dim_stride_is_ignored_for_contiguity() -> None:
    assert Slice(offset=0, sizes=[1, 3], strides=[6, 1]).is_contiguous()


def test_slice_strided_is_not_contiguous() -> None:
    assert not Slice(offset=1, sizes=[2, 2], strides=[6, 1]).is_contiguous()
    assert not Slice(offset=0, sizes=[4], strides=[3]).is_contiguous()
    assert not Slice(offset=0, sizes=[3, 2], strides=[1, 3]).is_contiguous()


# -- from_list ----------------------------------------------------------------------------------


def _runs(ranks: list[int]) -> list[tuple[int, int, int]]:
    return [(piece.offset, piece.sizes[0], piece.strides[0]) for piece in Slice.from_list(ranks)]


def test_slice_from_list_single_run_is_one_slice() -> None:
    assert Slice.from_list([1, 3, 5]) == [Slice(offset=1, sizes=[3], strides=[2])]
    assert Slice.from_list([3, 4, 5, 6]) == [Slice(offset=3, sizes=[4], strides=[1])]


def test_slice_from_list_single_rank_has_one_dim_of_size_one() -> None:
    assert Slice.from_list([4]) == [Slice(offset=4, sizes=[1], strides=[1])]


def test_slice_from_list_cuts_greedy_arithmetic_runs() -> None:
    # Monarch's decomposition: sorted ranks, maximal runs with a positive step.
    assert _runs([0, 1, 2, 5, 6, 7]) == [(0, 3, 1), (5, 3, 1)]
    assert _runs([0, 2, 4, 5, 6]) == [(0, 3, 2), (5, 2, 1)]
    assert _runs([0, 2, 3]) == [(0, 2, 2), (3, 1, 1)]


def test_slice_from_list_sorts_and_keeps_repeats_apart() -> None:
    assert _runs([3, 1]) == [(1, 2, 2)]
    assert _runs([0, 1, 1]) == [(0, 2, 1), (1, 1, 1)]
    assert _runs([4, 4]) == [(4, 1, 1), (4, 1, 1)]


def test_slice_from_list_empty_gives_no_slices() -> None:
    assert Slice.from_list([]) == []


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=12))
def test_slice_from_list_covers_the_sorted_ranks(ranks: list[int]) -> None:
    pieces = Slice.from_list(ranks)
    assert [rank for piece in pieces for rank in piece] == sorted(ranks)
    assert all(piece.ndim == 1 for piece in pieces)


# -- value semantics ----------------------------------------------------------------------------


def test_slice_equal_slices_hash_equal() -> None:
    a = Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    b = Slice(offset=1, sizes=(2, 2), strides=(6, 1))
    assert a == b
    assert hash(a) == hash(b)
    assert a != Slice(offset=0, sizes=[2, 2], strides=[6, 1])
    assert a != "not a slice"


def test_slice_repr_is_monarchs_rust_debug_form() -> None:
    s = Slice(offset=1, sizes=[2, 3], strides=[6, 1])
    assert repr(s) == "Slice { offset: 1, sizes: [2, 3], strides: [6, 1] }"
    assert str(s) == repr(s)


def test_slice_getitem_with_python_slice_gives_rank_tuple() -> None:
    s = Slice(offset=1, sizes=[2, 3], strides=[6, 1])
    assert s[1:3] == (2, 3)
    assert s.get(4) == 8


def test_slice_pickle_round_trips() -> None:
    s = Slice(offset=1, sizes=[2, 2], strides=[6, 1])
    assert pickle.loads(pickle.dumps(s)) == s


def test_slice_sizes_list_is_a_copy() -> None:
    s = Slice.new_row_major([2, 3])
    s.sizes.append(7)
    s.strides[0] = 99
    assert s.sizes == [2, 3]
    assert s.strides == [3, 1]


# -- properties ---------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(nested_slices())
def test_slice_iteration_matches_brute_force(s: Slice) -> None:
    expected = _brute_force(s.offset, s.sizes, s.strides)
    assert list(s) == expected
    assert len(s) == len(expected)
    assert [s[i] for i in range(len(s))] == expected


@settings(max_examples=80, deadline=None)
@given(nested_slices())
def test_slice_coordinates_and_nditem_are_inverse(s: Slice) -> None:
    for position, rank in enumerate(s):
        coords = s.coordinates(rank)
        assert s.nditem(coords) == rank
        assert s.index(rank) == position


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=0, max_size=4), st.integers(0, 9))
def test_slice_row_major_with_offset_is_contiguous_range(sizes: list[int], offset: int) -> None:
    dense = Slice(offset=offset, sizes=sizes, strides=row_major_strides(sizes))
    assert dense.is_contiguous()
    assert list(dense) == list(range(offset, offset + len(dense)))
