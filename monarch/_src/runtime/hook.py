"""The one hook mechanism: where a module lets code it may not import plug behaviour into it.

A lower layer that must call something an upper layer provides declares the place here, as a
`Slot` (one callable: the last install wins) or a `Hook` (many callbacks, called in the order they
were added). The place's type parameter is a `typing.Protocol` whose `__call__` spells out the
signature, so `mypy --strict` checks both what is installed and what the caller passes. Nothing
assigns another module's globals or appends to its lists: it installs into a declared place.

The alternative rejected: module globals (`module.hook = fn`) and bare lists patched from
elsewhere. They type as `Callable[..., Any]` at best, nobody can tell which module owns the
patch, and their semantics (replace? append twice? which order?) lived at each call site.

Declared places: `runtime.runtime.on_start`, `runtime.future.on_wait`, a `Mailbox`'s
`on_peer_lost`/`on_undeliverable`/`lost_delegate`, a `Runtime`'s `shutdown_hooks`, and the mesh's
slots in `mesh/hooks.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["Hook", "Slot"]

T = TypeVar("T")


class Slot(Generic[T]):
    """One named place for one implementation (a callable, or a value such as `proc_setup`).

    `install(value)` fills it (a later install replaces the earlier one: the last wiring wins),
    `clear()` empties it, `get()` returns the value or None, `require()` returns it or raises
    `RuntimeError` with the slot's `missing` text. Reads take no lock: a caller sees either the
    old or the new value.
    """

    __slots__ = ("_lock", "_value", "doc", "missing", "name")

    def __init__(self, name: str, doc: str, missing: str = "") -> None:
        self.name = name
        self.doc = doc
        self.missing = missing or f"Nothing is installed in {name}"
        self._value: T | None = None  # None: empty (the feature is absent)
        self._lock = threading.Lock()

    def install(self, value: T) -> None:
        with self._lock:
            self._value = value

    def clear(self) -> None:
        with self._lock:
            self._value = None

    def get(self) -> T | None:
        return self._value

    def require(self) -> T:
        value = self._value
        if value is None:
            raise RuntimeError(f"{self.missing} (hook slot {self.name!r} is empty)")
        return value

    def __repr__(self) -> str:
        state = "empty" if self._value is None else f"filled with {self._value!r}"
        return f"<Slot {self.name} ({self.doc}): {state}>"


class Hook(Generic[T]):
    """One named place for many callbacks, called in the order they were added.

    `add(callback)` is idempotent (a callback already there keeps its place) and says whether it
    added; `remove(callback)` takes it out (nothing happens if it is not there). Iterating gives
    a snapshot, so a callback that adds or removes callbacks while the hook runs changes the
    next run only. What a raising callback does to the others is the caller's rule, stated
    where the hook is declared.
    """

    __slots__ = ("_callbacks", "_lock", "doc", "name")

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.doc = doc
        self._callbacks: tuple[T, ...] = ()  # replaced whole on each change: reads take no lock
        self._lock = threading.Lock()

    def add(self, callback: T) -> bool:
        with self._lock:
            if callback in self._callbacks:
                return False
            self._callbacks = (*self._callbacks, callback)
            return True

    def remove(self, callback: T) -> None:
        with self._lock:
            self._callbacks = tuple(c for c in self._callbacks if c != callback)

    def __iter__(self) -> Iterator[T]:
        return iter(self._callbacks)

    def __reversed__(self) -> Iterator[T]:
        return reversed(self._callbacks)

    def __len__(self) -> int:
        return len(self._callbacks)

    def __contains__(self, callback: object) -> bool:
        return callback in self._callbacks

    def __repr__(self) -> str:
        return f"<Hook {self.name} ({self.doc}): {len(self._callbacks)} callbacks>"
