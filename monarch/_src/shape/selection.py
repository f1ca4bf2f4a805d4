"""`Selection`: torchmonarch's selection expressions over multidimensional meshes, parsed.

A selection says, dimension by dimension, which points of a mesh it takes: `*` every index,
`?` one index (any), `n` one index, `a:b`, `a:`, `:b`, `a:b:s` a range (with a step), and a
comma-separated list gives the dimensions in order (`*, 0:4`: every row, columns 0-3).
Parenthesised groups nest, `&` intersects and `|` unites (`&` binds tighter, both from the
left): `(*, 1:3) & (0, *)`, `0 & (1 | 2)`. A group followed by more dimensions takes them at
each of its ends: `(0 | 1), *` is `(0, *) | (1, *)`.

A parsed selection prints as Monarch's does (its Rust form: `All(Range(Range(1, Some(3), 1),
True))`). As on Monarch it is an opaque value: no API of this package takes one yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Selection"]


@dataclass(frozen=True)
class _True:
    def __repr__(self) -> str:
        return "True"


@dataclass(frozen=True)
class _Dim:
    kind: str  # "All" or "Any"
    rest: _Node

    def __repr__(self) -> str:
        return f"{self.kind}({self.rest!r})"


@dataclass(frozen=True)
class _Range:
    start: int
    end: int | None
    step: int
    rest: _Node

    def __repr__(self) -> str:
        end = "None" if self.end is None else f"Some({self.end})"
        return f"Range(Range({self.start}, {end}, {self.step}), {self.rest!r})"


@dataclass(frozen=True)
class _Binary:
    kind: str  # "Union" or "Intersection"
    left: _Node
    right: _Node

    def __repr__(self) -> str:
        return f"{self.kind}({self.left!r}, {self.right!r})"


_Node = _True | _Dim | _Range | _Binary

_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


def _then(node: _Node, rest: _Node) -> _Node:
    """`node` with every final `True` replaced by `rest` (the dimensions that follow it)."""
    if isinstance(node, _True):
        return rest
    if isinstance(node, _Dim):
        return _Dim(node.kind, _then(node.rest, rest))
    if isinstance(node, _Range):
        return _Range(node.start, node.end, node.step, _then(node.rest, rest))
    return _Binary(node.kind, _then(node.left, rest), _then(node.right, rest))


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        for match in _TOKEN.finditer(text):
            token = match.group(1) or match.group(2)
            if token is not None and not token.isspace():
                self.tokens.append(token)
        self.at = 0

    def error(self, why: str) -> ValueError:
        return ValueError(
            f"Invalid selection {self.text!r}: {why}. A selection lists each dimension's "
            "indices ('*', '?', 'n', 'a:b', 'a:b:s'), separated by ',', grouped with '(...)' "
            "and combined with '&' and '|', e.g. '(*, 1:3) & (0, *)'."
        )

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise self.error(f"expected {expected or 'more'!r} at the end" if token is None
                             else f"expected {expected!r}, found {token!r}")
        self.at += 1
        return token

    def parse(self) -> _Node:
        node = self.union()
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()!r}")
        return node

    def union(self) -> _Node:
        node = self.intersection()
        while self.peek() == "|":
            self.take()
            node = _Binary("Union", node, self.intersection())
        return node

    def intersection(self) -> _Node:
        node = self.dims()
        while self.peek() == "&":
            self.take()
            node = _Binary("Intersection", node, self.dims())
        return node

    def dims(self) -> _Node:
        first = self.dim()
        if self.peek() != ",":
            return first
        self.take()
        return _then(first, self.dims())

    def dim(self) -> _Node:
        token = self.peek()
        if token == "(":
            self.take()
            node = self.union()
            self.take(")")
            return node
        if token in ("*", "?"):
            self.take()
            return _Dim("All" if token == "*" else "Any", _True())
        if token is not None and (token.isdigit() or token == ":"):
            return self.range()
        raise self.error("expected a dimension ('*', '?', an index or a range)"
                         if token is None else f"unexpected {token!r}")

    def number(self) -> int | None:
        token = self.peek()
        if token is not None and token.isdigit():
            self.take()
            return int(token)
        return None

    def range(self) -> _Node:
        start = self.number()
        if self.peek() != ":":
            assert start is not None
            return _Range(start, start + 1, 1, _True())
        self.take()
        end = self.number()
        step = 1
        if self.peek() == ":":
            self.take()
            given = self.number()
            if given is None:
                raise self.error("a step after the second ':' must be a number")
            step = given
        return _Range(0 if start is None else start, end, step, _True())


class Selection:
    """A parsed selection expression (see the module docstring); prints as Monarch's."""

    __slots__ = ("_node",)
    _node: _Node

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError(
            "Selection is not constructed directly: use Selection.from_string('(*, 0:4)'), "
            "Selection.all() or Selection.any()."
        )

    @classmethod
    def _of(cls, node: _Node) -> Selection:
        selection = object.__new__(cls)
        selection._node = node
        return selection

    @classmethod
    def from_string(cls, s: str) -> Selection:
        """Parse `s` (ValueError naming what is wrong when it is not a selection)."""
        if not isinstance(s, str):
            raise TypeError(f"Selection.from_string takes a str, got {type(s).__name__}.")
        return cls._of(_Parser(s).parse())

    @classmethod
    def all(cls) -> Selection:
        """Every point of the mesh (`*` in each dimension)."""
        return cls._of(_Dim("All", _True()))

    @classmethod
    def any(cls) -> Selection:
        """One point of the mesh, any (`?` in each dimension)."""
        return cls._of(_Dim("Any", _True()))

    def __repr__(self) -> str:
        return repr(self._node)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Selection) and self._node == other._node

    def __hash__(self) -> int:
        return hash(self._node)
