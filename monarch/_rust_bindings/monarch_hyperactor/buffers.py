"""torchmonarch's `monarch_hyperactor.buffers`: `Buffer` (append-only) and `FrozenBuffer`.

On Monarch these hold message bytes in Rust; here `FrozenBuffer` is a `bytes` subclass (so it
is a real buffer: `memoryview`, `pickle.loads` and `len` take it as they take bytes) that also
reads like a binary file, as Monarch's does for the unpickler.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Buffer", "FrozenBuffer"]


class FrozenBuffer(bytes):
    """Immutable bytes with a read position (`read`, `readline`, `readinto`)."""

    _pos: int  # where the next read starts; 0 when made

    def __new__(cls, data: Any = b"") -> FrozenBuffer:
        buf = super().__new__(cls, data)
        buf._pos = 0
        return buf

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes from the read position (all that is left when negative)."""
        end = len(self) if size is None or size < 0 else min(len(self), self._pos + size)
        out = bytes(self[self._pos : end])
        self._pos = end
        return out

    def readline(self, size: int = -1) -> bytes:
        """Bytes up to and including the next newline (at most `size` when given)."""
        nl = self.find(b"\n", self._pos)
        end = len(self) if nl < 0 else nl + 1
        if size is not None and size >= 0:
            end = min(end, self._pos + size)
        out = bytes(self[self._pos : end])
        self._pos = end
        return out

    def readinto(self, b: bytearray | memoryview) -> int:
        """Fill `b` from the read position; the number of bytes copied."""
        chunk = self.read(len(b))
        b[: len(chunk)] = chunk
        return len(chunk)

    def __str__(self) -> str:
        return f"FrozenBuffer({bytes(self)!r})"

    __repr__ = __str__


class Buffer:
    """An append-only byte buffer (what a pickler writes to); `freeze()` makes it a
    `FrozenBuffer`."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data = bytearray()

    def write(self, buff: Any) -> int:
        """Append a bytes-like object; the number of bytes appended."""
        view = memoryview(buff).cast("B")
        self._data += view
        return len(view)

    def __len__(self) -> int:
        return len(self._data)

    def freeze(self) -> FrozenBuffer:
        """The bytes written so far, as a `FrozenBuffer` (this buffer is left empty)."""
        frozen = FrozenBuffer(bytes(self._data))
        self._data = bytearray()
        return frozen
