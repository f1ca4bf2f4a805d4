"""Control operations: typed records for a process's agent, and the table that dispatches them.

A control operation is a `NamedTuple` declared with `@control_op("wire_name")`: its fields
are named, its handler takes the record (`def spawn(peer, op: Spawn, reply)`) and reads them by
name. Each layer declares its operations in one module it owns (this one for the runtime's
own, `mesh/control_ops.py`, `hosts/control_ops.py`, and one per feature) and registers one
handler per record type in its process's `Mailbox.control`, a `ControlTable`. Registering a
record type twice, or two record types under one wire name, is an error naming both.

On the wire a `CONTROL` envelope carries the operation's wire name and its fields as a plain
tuple (`control()` builds it), as it did when operations were bare strings: the receiver's
table rebuilds the record (one C-level tuple construction, the fields shared). So a record
costs nothing on the wire, and an operation the receiver does not know (a newer peer's) is
refused with a logged error naming it. Rejected alternative: pickling the records themselves,
which puts a class reference in every envelope and makes an unknown class fail the unpickling
of the whole batch it came in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from monarch._src.runtime.envelope import CONTROL, Control, PortAddr

__all__ = [
    "ControlTable",
    "PortsHanded",
    "control",
    "control_op",
    "op_name",
    "record_of",
]

OpT = TypeVar("OpT", bound=tuple[Any, ...])
# What a handler receives: the sending process's address, the record, where an answer goes.
Handler = Callable[[str, Any, "PortAddr | None"], None]

# Record class -> wire name, and back: filled by `control_op` when each layer's module loads.
_NAMES: dict[type, str] = {}
_CLASSES: dict[str, type] = {}
_retype = tuple.__new__


def control_op(name: str) -> Callable[[type[OpT]], type[OpT]]:
    """Declare a `NamedTuple` class as the control operation sent as `name`."""

    def declare(cls: type[OpT]) -> type[OpT]:
        other = _CLASSES.get(name)
        if other is not None and _qualname(other) != _qualname(cls):  # a reload is the same
            raise TypeError(
                f"Control operation {name!r} is declared twice: by {_qualname(other)} and by "
                f"{_qualname(cls)}. Give one of them another wire name."
            )
        _NAMES[cls] = name
        _CLASSES[name] = cls
        return cls

    return declare


def op_name(op: type) -> str:
    """The wire name `op` was declared with (`control_op`)."""
    name = _NAMES.get(op)
    if name is None:
        raise TypeError(
            f"{_qualname(op)} is not a control operation. Declare it with @control_op(name)."
        )
    return name


def control(op: tuple[Any, ...], reply: PortAddr | None = None) -> Control:
    """The envelope that carries `op` (a record declared with `control_op`); the handler's
    answer or error goes to `reply`."""
    name = _NAMES.get(type(op))
    if name is None:
        name = op_name(type(op))  # raises, naming the class
    return Control(CONTROL, name, tuple(op), reply)


def record_of(env: Control, op: type[OpT]) -> OpT | None:
    """`env`'s operation as an `op` record, or None if it carries another operation (for
    code that forwards envelopes and rewrites some, as a relay does)."""
    if env.op != op_name(op):
        return None
    return _retype(op, env.fields)


class _Entry(NamedTuple):
    op: type
    handler: Handler
    fields: tuple[str, ...]  # the record's field names


class ControlTable:
    """The control operations one process handles: record type -> handler.

    Registered at start-up by the agents of the process (any thread before the mailbox serves,
    the loop after); read by the loop for each `CONTROL` envelope (`resolve`).
    """

    def __init__(self) -> None:
        self._by_name: dict[str, _Entry] = {}  # wire name -> the record type and its handler

    def register(self, op: type[OpT], handler: Callable[[str, OpT, PortAddr | None], None]
                 ) -> None:
        """Handle `op` with `handler`; raises ValueError if `op` is handled already."""
        name = op_name(op)
        entry = self._by_name.get(name)
        if entry is not None:
            raise ValueError(
                f"Control operation {name!r} ({_qualname(op)}) is already handled by "
                f"{_qualname(entry.handler)}, so {_qualname(handler)} cannot also handle it. "
                "Register each operation once, or call replace() to swap the handler."
            )
        self._by_name[name] = _Entry(op, handler, _fields(op))

    def replace(self, op: type[OpT], handler: Callable[[str, OpT, PortAddr | None], None]
                ) -> Callable[[str, OpT, PortAddr | None], None]:
        """Swap the handler of `op` for `handler`; returns the one it replaces (raises
        KeyError naming `op` if there was none)."""
        previous = self.handler(op)
        self._by_name[op_name(op)] = _Entry(op, handler, _fields(op))
        return previous

    def handler(self, op: type[OpT]) -> Callable[[str, OpT, PortAddr | None], None]:
        """The handler registered for `op` (KeyError naming it if none is)."""
        entry = self._by_name.get(op_name(op))
        if entry is None:
            raise KeyError(f"This process handles no control operation {op_name(op)!r}.")
        return entry.handler

    def __contains__(self, op: type) -> bool:
        name = _NAMES.get(op)
        return name is not None and name in self._by_name

    def resolve(self, env: Control) -> tuple[Handler, tuple[Any, ...]] | None:
        """The handler of `env`'s operation and its record, or None if this process handles
        no such operation. Raises ValueError when the fields do not fit the record (a peer
        running another version)."""
        entry = self._by_name.get(env.op)
        if entry is None:
            return None
        fields = env.fields  # a plain tuple (`control()`)
        if len(fields) != len(entry.fields):
            raise ValueError(
                f"Control operation {env.op!r} came with {len(fields)} fields where this "
                f"process expects {len(entry.fields)} ({', '.join(entry.fields)}). The sender "
                "probably runs another version of monarch; run the same one everywhere."
            )
        return entry.handler, _retype(entry.op, fields)


def _fields(op: type) -> tuple[str, ...]:
    fields = getattr(op, "_fields", None)
    if not isinstance(fields, tuple):
        raise TypeError(f"{_qualname(op)} is not a NamedTuple; control operations are.")
    return fields


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


@control_op("ports_handed")
class PortsHanded(NamedTuple):
    """Ports of the receiving process went to `peers` in call arguments: it watches those
    procs, and answers the ports with the exit status if one dies (`Mailbox.ports_handed`)."""

    ports: list[tuple[PortAddr, int | None, bool]]
    """(port address, rank, once) of each port handed."""
    peers: tuple[str, ...]
    """The addresses of the procs the ports went to."""
