"""The mesh protocol's shape arithmetic: slice, split, rename and flatten a `Shape`.

Every mesh type (host, proc, actor, value, device) answers these by transforming its `Shape`
with the functions here and rebuilding itself around the result, so the rules and the error
strings users match on live in one place. All results keep the original global ranks.

The error types and leading phrases are Monarch's (`TypeError` for an unknown label in `slice`,
`IndexError("index out of range")`, `ValueError` for split and flatten problems).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from monarch._src.shape.shape import Shape
from monarch._src.shape.slice import Slice


def _check_label(shape: Shape, label: str) -> None:
    if label not in shape.labels:
        raise TypeError(f"Shape does not have dimension labeled {label!r}")


def slice_shape(shape: Shape, **dims: int | slice) -> Shape:
    """Restrict `shape`: an int picks one index and drops the dim; a `slice` keeps it."""
    for label in dims:
        _check_label(shape, label)
    for label, selector in dims.items():
        if isinstance(selector, slice):
            shape = shape.select(label, selector)
            continue
        try:
            index = operator.index(selector)
        except TypeError:
            raise TypeError(
                f"Cannot slice dimension {label!r} with {selector!r}; "
                "pass an int to pick one index or a slice such as slice(0, 2)."
            ) from None
        if not 0 <= index < shape.extent[label]:
            raise IndexError("index out of range")
        shape = shape.at(label, index)
    return shape


def _split_names(label: str, spec: object) -> list[str]:
    """Validate the new names for dimension `label` given as `label=spec`."""
    # ValueError, not TypeError, for the two wrong-type specs: Monarch raises ValueError here.
    if isinstance(spec, str):
        raise ValueError(  # noqa: TRY004
            f"Split of dimension {label!r} needs a tuple of new names, got the string {spec!r}; "
            f"write {label}=({spec!r},) for a single name."
        )
    if not isinstance(spec, Sequence):
        raise ValueError(  # noqa: TRY004
            f"Split of dimension {label!r} needs a tuple of new names, got {spec!r}; "
            "sizes of new dimensions go in their own keyword arguments."
        )
    names = list(spec)
    if not names:
        raise ValueError(f"Split of dimension {label!r} needs at least one new name.")
    for name in names:
        if not isinstance(name, str):
            raise TypeError(
                f"Split of dimension {label!r} got {name!r} as a new name; names must be strings."
            )
    return names


def _split_sizes(
    label: str, size: int, names: list[str], constraints: dict[str, object]
) -> list[int]:
    """Sizes for `names` splitting dimension `label` of `size`, consuming `constraints`."""
    sizes: list[int | None] = []
    unknown: str | None = None
    for name in names:
        if name not in constraints:
            if unknown is not None:
                raise ValueError(
                    f"Cannot infer size of {name!r} when splitting dimension {label!r}: both "
                    f"{unknown!r} and {name!r} have unknown size; pass one, e.g. {name}=2."
                )
            unknown = name
            sizes.append(None)
            continue
        raw = constraints.pop(name)
        try:
            if isinstance(raw, bool):
                raise TypeError("a bool is not a size")
            value = operator.index(raw)  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(
                f"Size of new dimension {name!r} must be an int, got {raw!r}; pass e.g. {name}=2."
            ) from None
        if value < 1:
            raise ValueError(f"Size of new dimension {name!r} must be positive, got {value}.")
        sizes.append(value)
    known = 1
    for part in sizes:
        known *= part or 1
    if size % known != 0:
        given = {n: s for n, s in zip(names, sizes) if s is not None}
        raise ValueError(
            f"Dimension {label!r} of size {size} is not evenly divided by {known}, "
            f"the product of the given sizes {given}."
        )
    if unknown is None and known != size:
        raise ValueError(
            f"Cannot split dimension {label!r} of size {size} into sizes {sizes}: they multiply "
            f"to {known}; make them multiply to {size} or leave one out to be inferred."
        )
    return [size // known if part is None else part for part in sizes]


def split_shape(shape: Shape, **kwargs: Sequence[str] | int) -> Shape:
    """Split dimensions into several, e.g. `split_shape(s, host=("dp", "pp"), pp=2)`.

    Keywords naming existing dimensions give the new names (outermost first); the other
    keywords give sizes of new dimensions. At most one size per split dimension is inferred.
    """
    old_labels = shape.labels
    specs = {label: spec for label, spec in kwargs.items() if label in old_labels}
    constraints: dict[str, object] = {k: v for k, v in kwargs.items() if k not in specs}
    labels: list[str] = []
    sizes: list[int] = []
    strides: list[int] = []
    ndslice = shape.ndslice
    for label, size, stride in zip(old_labels, ndslice.sizes, ndslice.strides):
        if label not in specs:
            labels.append(label)
            sizes.append(size)
            strides.append(stride)
            continue
        names = _split_names(label, specs[label])
        part_sizes = _split_sizes(label, size, names, constraints)
        part_strides = [stride] * len(part_sizes)
        for part in range(len(part_sizes) - 2, -1, -1):
            part_strides[part] = part_strides[part + 1] * part_sizes[part + 1]
        labels.extend(names)
        sizes.extend(part_sizes)
        strides.extend(part_strides)
    if constraints:
        raise ValueError(
            f"unused size constraints: {sorted(constraints)}; every size keyword must name a "
            "new dimension of this split."
        )
    _check_distinct(labels, "split")
    return Shape(labels, Slice(offset=ndslice.offset, sizes=sizes, strides=strides))


def _check_distinct(labels: list[str], operation: str) -> None:
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise ValueError(
                f"Duplicate dimension name {label!r} in the result of {operation}: {labels}; "
                "choose distinct names."
            )
        seen.add(label)


def rename_shape(shape: Shape, **kwargs: str) -> Shape:
    """Rename dimensions, e.g. `rename_shape(s, host="dp")`; others keep their names."""
    labels = shape.labels
    for old, new in kwargs.items():
        if old not in labels:
            raise ValueError(
                f"Cannot rename dimension {old!r}: the shape's dimensions are {labels}."
            )
        if not isinstance(new, str):
            raise TypeError(f"New name for dimension {old!r} must be a string, got {new!r}.")
    renamed = [kwargs.get(label, label) for label in labels]
    _check_distinct(renamed, "rename")
    return Shape(renamed, shape.ndslice)


def flatten_shape(shape: Shape, name: str) -> Shape:
    """Collapse all dimensions into one named `name`; only for dense row-major shapes."""
    if not isinstance(name, str):
        raise TypeError(f"flatten needs a string dimension name, got {name!r}.")
    ndslice = shape.ndslice
    if not ndslice.is_contiguous():
        raise ValueError(
            f"cannot flatten sparse mesh: {shape!r} does not cover a dense range of ranks; "
            "flatten before slicing, or use split and rename, which work on sparse meshes."
        )
    return Shape([name], Slice(offset=ndslice.offset, sizes=[len(ndslice)], strides=[1]))
