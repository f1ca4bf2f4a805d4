"""Telemetry entry points: `traced`, `span`, `get_meter`.

Without a telemetry backend (OpenTelemetry arrives with the observability work) they cost
nothing: `traced` returns the function unchanged, `span` is an empty context manager, and the
meter's instruments accept and drop measurements.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, TypeVar, overload

__all__ = ["get_meter", "span", "traced"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def traced(fn: F) -> F: ...
@overload
def traced(fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...
def traced(fn: Any = None, *, name: str | None = None) -> Any:
    """Mark a function as traced (a span per call once a telemetry backend is configured)."""
    if fn is None:
        return lambda f: f
    return fn


@contextlib.contextmanager
def span(name: str) -> Iterator[None]:
    """A named span around a block."""
    yield


class _Instrument:
    def __init__(self, name: str) -> None:
        self.name = name

    def add(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        pass

    def record(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        pass


class _Meter:
    def __init__(self, name: str) -> None:
        self.name = name

    def create_counter(self, name: str, *args: Any, **kwargs: Any) -> _Instrument:
        return _Instrument(name)

    create_histogram = create_counter
    create_up_down_counter = create_counter
    create_gauge = create_counter


def get_meter(name: str = "monarch", *args: Any, **kwargs: Any) -> _Meter:
    """A meter whose instruments drop measurements until a telemetry backend is configured."""
    return _Meter(name)
