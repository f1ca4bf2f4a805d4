"""Functions that simulator tests call as remote functions by dotted path."""

from __future__ import annotations

from typing import Any


def double(x: Any) -> Any:
    """Twice `x`."""
    return x * 2
