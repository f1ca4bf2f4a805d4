"""The mesh protocol's shape arithmetic: slice, split, rename and flatten a `Shape`.

Every mesh type (host, proc, actor, value, device) answers these by transforming its `Shape`
with the functions here and rebuilding itself around the result, so the rules and the error
strings users match on live in one place. All results keep the original global ranks.

The error types and leading phrases are Monarch's (`TypeError` for an unknown label in `slice`,
`IndexError("index out of range")`, `ValueError` for split and flatten problems).
"""

from __future__ import annotations

from collections.abc import Sequence

from monarch._src.shape.shape import Shape
from monarch._src.shape.slice import Slice, row_major_strides


def slice_shape(shape: Shape, **dims: int | slice) -> Shape:
    """Restrict `shape`: an int picks one index and drops the dim; a `slice` keeps it.

    Dimensions are applied in keyword order, each label checked when its turn comes.
    """
    for label, selector in dims.items():
        if label not in shape.labels:
            raise TypeError(f"Shape does not have dimension labeled {label!r}")
        if isinstance(selector, slice):
            shape = shape.select(label, selector)
            continue
        # Compared as given, as Monarch compares it: a str fails the comparison with Python's
        # TypeError, a float passes it and `at` refuses it.
        if selector < 0 or selector >= shape.extent[label]:
            raise IndexError("index out of range")
        shape = shape.at(label, selector)
    return shape


def _split_request(
    labels: list[str], kwargs: dict[str, object]
) -> tuple[dict[str, Sequence[str]], dict[str, int]]:
    """Sort `split`'s keywords into new names per existing dimension and sizes of new ones."""
    splits: dict[str, Sequence[str]] = {}
    sizes: dict[str, int] = {}
    for key, value in kwargs.items():
        if key in labels:
            if isinstance(value, str):
                raise ValueError(f"expected a sequence of dimensions, but got '{value}'")
            splits[key] = value  # type: ignore[assignment]
        elif isinstance(value, int):
            sizes[key] = value
        else:
            raise ValueError(
                f"'{key}' is not an existing dim. Expected an integer size constraint on a new "
                "dim."
            )
    return splits, sizes


def _part_sizes(label: str, size: int, names: Sequence[str], sizes: dict[str, int]) -> list[int]:
    """Sizes of the dimensions `names` that dimension `label` of `size` splits into.

    Consumes their entries of `sizes`; at most one of them may be missing and is inferred.
    The error texts are Monarch's.
    """
    known = 1
    unknown: str | None = None
    for name in names:
        if name in sizes:
            known *= sizes[name]
        elif unknown is None:
            unknown = name
        else:
            raise ValueError(
                f"Cannot infer size of {names} because both {name} and {unknown} have unknown "
                f"size. Specify at least one as argument, e.g. {name}=4"
            )
    if unknown is not None:
        inferred, remainder = divmod(size, known) if known else (0, 1)
        if remainder:
            given = tuple(sizes.get(name, "?") for name in names)
            raise ValueError(
                f"Dimension '{label}' of size {size} is not evenly divided by {names!r} "
                f"with sizes {given!r}"
            )
        sizes[unknown] = inferred
    elif known != size:
        given = tuple(sizes[name] for name in names)
        raise ValueError(
            f"Dimension '{label}' of size {size} is not evenly divided by {names!r} "
            f"with sizes {given!r}"
        )
    return [sizes.pop(name) for name in names]


def split_shape(shape: Shape, **kwargs: Sequence[str] | int) -> Shape:
    """Split dimensions into several, e.g. `split_shape(s, host=("dp", "pp"), pp=2)`.

    Keywords naming existing dimensions give the new names (outermost first); the other
    keywords give sizes of new dimensions. At most one size per split dimension is inferred.
    """
    splits, sizes = _split_request(shape.labels, dict(kwargs))
    labels: list[str] = []
    new_sizes: list[int] = []
    strides: list[int] = []
    ndslice = shape.ndslice
    for label, size, stride in zip(shape.labels, ndslice.sizes, ndslice.strides):
        names = splits.get(label, (label,))
        for position, name in enumerate(names):
            if name in labels or name in names[:position]:
                raise ValueError(f"Duplicate dimension name '{name}'")
        parts = _part_sizes(label, size, names, sizes)
        part_strides = [stride] * len(parts)
        for part in range(len(parts) - 2, -1, -1):
            part_strides[part] = part_strides[part + 1] * parts[part + 1]
        labels.extend(names)
        new_sizes.extend(parts)
        strides.extend(part_strides)
    if sizes:
        raise ValueError(f"unused size constraints: {tuple(sizes)}")
    return Shape(labels, Slice(offset=ndslice.offset, sizes=new_sizes, strides=strides))


def rename_shape(shape: Shape, **kwargs: str) -> Shape:
    """Rename dimensions, e.g. `rename_shape(s, host="dp")`; others keep their names.

    A rename is a split of each named dimension into one new name, so its errors are split's.
    """
    return split_shape(shape, **{old: (new,) for old, new in kwargs.items()})


def flatten_shape(shape: Shape, name: str) -> Shape:
    """Collapse all dimensions into one named `name`; only for dense row-major shapes."""
    ndslice = shape.ndslice
    dense = row_major_strides(ndslice.sizes)
    if ndslice.strides != dense:
        raise ValueError(
            f"cannot flatten sparse mesh: ndslice.strides={ndslice.strides} != "
            f"dense_strides={dense}"
        )
    return Shape([name], Slice(offset=ndslice.offset, sizes=[len(ndslice)], strides=[1]))
