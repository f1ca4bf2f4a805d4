"""The commands of the `monarch_dbg>` shell, and their parser.

    attach NAME RANK     (a)   hand the terminal to one paused actor's pdb
    list                 (l)   the paused actors
    cast NAME ranks(R) CMD     send one pdb command to several ranks of actor mesh NAME
    continue             (c)   clear every breakpoint and resume every paused actor
    help                 (h)
    quit                 (q)   leave the shell; the actors stay paused

`R` in `ranks(R)` is one rank (`3`), a list of two or more (`1,4,6`), a range
(`start?:stop?(:step?)?`, open ends meaning 0 and "to the end") or a filter on the mesh's
dimensions (`hosts=1, gpus=(0,2), dim=0::2`). Blanks inside the parentheses do not matter.

A hand-written parser (no grammar library): `DebugCommand.parse` returns the command, or None
after writing what is wrong to the shell's output.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monarch._src.debug.io import DebugIO

__all__ = ["Attach", "Cast", "Continue", "DebugCommand", "Help", "ListCommand", "Quit",
           "RanksType", "parse_command"]

# One rank, a list of ranks, a range of ranks, or a filter on named dimensions.
RanksType = int | list[int] | range | dict[str, range | list[int] | int]

_NAME = re.compile(r"[-_a-zA-Z0-9]+")
_INT = re.compile(r"[0-9]+")
_DIM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DebugCommand:
    """A parsed shell command (one of the dataclasses below)."""

    @staticmethod
    async def parse(debug_io: DebugIO, line: str) -> DebugCommand | None:
        """The command `line` spells, or None after telling `debug_io` what is wrong."""
        try:
            return parse_command(line)
        except ValueError as exc:
            await debug_io.output(f"Error parsing input: {exc}\n")
            return None


@dataclass
class Attach(DebugCommand):
    actor_name: str
    rank: int


@dataclass
class ListCommand(DebugCommand):
    pass


@dataclass
class Quit(DebugCommand):
    pass


@dataclass
class Help(DebugCommand):
    pass


@dataclass
class Continue(DebugCommand):
    pass


@dataclass
class Cast(DebugCommand):
    actor_name: str
    ranks: RanksType
    command: str


_SINGLE: dict[str, type[DebugCommand]] = {
    "l": ListCommand, "list": ListCommand, "h": Help, "help": Help,
    "q": Quit, "quit": Quit, "c": Continue, "continue": Continue,
}

_USAGE = ("expected one of: attach NAME RANK, list, cast NAME ranks(...) COMMAND, continue, "
          "help, quit")


def parse_command(line: str) -> DebugCommand:
    """Parse one shell line; raises `ValueError` saying what is wrong."""
    words = line.split()
    if not words:
        raise ValueError(f"empty command; {_USAGE}")
    head = words[0]
    if head in _SINGLE:
        if len(words) != 1:
            raise ValueError(f"{head!r} takes no arguments")
        return _SINGLE[head]()
    if head in ("a", "attach"):
        if len(words) != 3 or not _NAME.fullmatch(words[1]) or not _INT.fullmatch(words[2]):
            raise ValueError(f"use: {head} ACTOR_NAME RANK (RANK a non-negative integer), got "
                             f"{line.strip()!r}")
        return Attach(words[1], int(words[2]))
    if head == "cast":
        return _parse_cast(line)
    raise ValueError(f"unknown command {head!r}; {_USAGE}")


def _parse_cast(line: str) -> Cast:
    text = line.strip()
    m = re.match(r"cast\s+([-_a-zA-Z0-9]+)\s+ranks\(", text)
    if m is None:
        raise ValueError(f"use: cast ACTOR_NAME ranks(...) PDB_COMMAND, got {text!r}")
    # Parentheses nest once, in a dimension's list: `dim=(1,2)`.
    depth, i = 1, m.end()
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    if depth:
        raise ValueError(f"unclosed 'ranks(' in {text!r}")
    ranks = _parse_ranks("".join(text[m.end():i - 1].split()))
    command = text[i:].strip()
    if not re.match(r"\w", command):
        raise ValueError(f"cast needs a pdb command after ranks(...), got {text[i:]!r}")
    return Cast(m.group(1), ranks, command)


def _parse_ranks(body: str) -> RanksType:
    """The inside of `ranks(...)`, blanks removed."""
    if not body:
        raise ValueError("ranks() is empty: give a rank, a list, a range or dimension=value")
    if "=" in body:
        return _parse_dims(body)
    if ":" in body:
        return _parse_range(body)
    if "," in body:
        return _parse_list(body)
    return _parse_int(body)


def _parse_int(text: str) -> int:
    if not _INT.fullmatch(text):
        raise ValueError(f"{text!r} is not a rank (a non-negative integer)")
    return int(text)


def _parse_list(text: str) -> list[int]:
    parts = text.split(",")
    if len(parts) < 2:
        raise ValueError(f"a list of ranks needs two or more, got {text!r}")
    return [_parse_int(p) for p in parts]


def _parse_range(text: str) -> range:
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"a range is start:stop or start:stop:step, got {text!r}")
    start = _parse_int(parts[0]) if parts[0] else 0
    stop = _parse_int(parts[1]) if parts[1] else sys.maxsize
    step = _parse_int(parts[2]) if len(parts) == 3 and parts[2] else 1
    if step == 0:
        raise ValueError(f"a range's step cannot be 0, got {text!r}")
    return range(start, stop, step)


def _parse_dims(text: str) -> dict[str, range | list[int] | int]:
    dims: dict[str, range | list[int] | int] = {}
    rest = text
    while True:
        m = _DIM.match(rest)
        if m is None or rest[m.end():m.end() + 1] != "=":
            raise ValueError(f"expected dimension=value in {text!r}")
        name, rest = m.group(), rest[m.end() + 1:]
        value: range | list[int] | int
        if rest.startswith("("):
            close = rest.find(")")
            if close < 0:
                raise ValueError(f"unclosed '(' after {name}= in {text!r}")
            value, rest = _parse_list(rest[1:close]), rest[close + 1:]
        else:
            cut = rest.find(",")
            item, rest = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
            value = _parse_range(item) if ":" in item else _parse_int(item)
        dims[name] = value
        if not rest:
            return dims
        if not rest.startswith(",") or len(rest) == 1:
            raise ValueError(f"expected ', dimension=value' after {name} in {text!r}")
        rest = rest[1:]
