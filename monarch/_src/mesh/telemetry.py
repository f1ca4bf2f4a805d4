"""Telemetry entry points: `traced`, `span`, `get_meter`, and the spans around endpoint calls.

Everything goes through the OpenTelemetry *API* (`opentelemetry-api`) when it is importable; the
application picks the SDK, exporters and sampling by installing a tracer/meter provider as usual,
and monarch only creates spans and instruments. Spans carry the current actor's name and rank
(`monarch.actor`, `monarch.rank`) so a trace shows which actor ran what.

Without OpenTelemetry nothing is paid per call: `traced` returns the function itself, `span` is a
shared empty context manager, the meter's instruments drop measurements, and endpoint dispatch
(`mesh/hosted.py`) skips instrumentation after reading one module flag. Spans are made once the
application installed a tracer provider in the process (`trace.set_tracer_provider`, e.g. in a
proc's bootstrap or an actor's `__init__`); before that they would only cost time. Whether
OpenTelemetry is there is decided once, at import, by `importlib.util.find_spec` (cheap); the
package itself is imported on first use, so importing monarch does not pay for it either. Set
`MONARCH_OTEL=0` to switch the OpenTelemetry path off even when the package is installed.

While the process records a job's SQL telemetry (`enable_telemetry`), `span` and `traced` also
write `spans` / `span_events` rows (torchmonarch's: the row's name is "python_user_span", the
span's own name and attributes are in `fields_json`), with or without OpenTelemetry.

Rejected: a monarch-specific span recorder. Users who trace already run OpenTelemetry; a second
tracing system would not join their traces.
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import inspect
import json
import os
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar, overload

from monarch._src.mesh.context import _message_rank, _tls
from monarch._src.telemetry import record

__all__ = ["OTEL", "get_meter", "instrument_endpoint", "span", "traced", "tracing_active"]

F = TypeVar("F", bound=Callable[..., Any])

# True when spans and meters go through OpenTelemetry; False makes every entry point free.
OTEL: bool = (
    os.environ.get("MONARCH_OTEL", "1") != "0"
    and importlib.util.find_spec("opentelemetry") is not None
)

_SCOPE = "monarch"
_tracer: Any = None  # the OpenTelemetry tracer, created on first use


def _get_tracer() -> Any:
    global _tracer
    if _tracer is None:
        from opentelemetry import trace

        # A ProxyTracer: it follows whatever provider the application installs, even later.
        _tracer = trace.get_tracer(_SCOPE)
    return _tracer


def _actor_attributes() -> dict[str, Any]:
    """The current actor's name and rank (the root client outside any actor)."""
    inst = getattr(_tls, "instance", None)
    if inst is None:
        return {"monarch.actor": "<root>"}
    rank = _message_rank.get()
    return {"monarch.actor": inst._display,
            "monarch.rank": rank.rank if rank is not None else inst.rank.rank}


class _NoSpan:
    """The shared do-nothing context manager `span` returns when nothing records spans."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_SPAN = _NoSpan()


def span(name: str, attributes: dict[str, Any] | None = None) -> AbstractContextManager[Any]:
    """A context manager: a span called `name` around the block, bound to the current actor.

    With OpenTelemetry the span is the current span inside the block (children nest under it) and
    records an exception that escapes; without it, the block runs unchanged.
    """
    if not isinstance(name, str):
        raise TypeError(f"span() needs a name string, got {type(name).__name__}.")
    otel = OTEL and tracing_active()
    if not otel and record.SINK is None:
        return _NO_SPAN
    attrs = _actor_attributes()
    if attributes:
        attrs.update(attributes)
    inner = _get_tracer().start_as_current_span(name, attributes=attrs) if otel else None
    if record.SINK is None:
        return inner  # type: ignore[return-value]
    return _RecordedSpan(name, attrs, inner)


# The span the current task or thread is inside (its telemetry id), for `spans.parent_id`.
_current_span: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "monarch_current_span", default=None)


class _RecordedSpan:
    """A user span while the job records telemetry: a `spans` row (torchmonarch's shape: name
    "python_user_span", the span's name and attributes in `fields_json`) and `span_events`
    enter / exit rows; around the OpenTelemetry span `inner`, if any."""

    __slots__ = ("_attrs", "_id", "_inner", "_name", "_token")

    def __init__(self, name: str, attrs: dict[str, Any], inner: Any) -> None:
        self._name = name
        self._attrs = attrs
        self._inner = inner
        self._id = 0
        self._token: contextvars.Token[int | None] | None = None

    def __enter__(self) -> Any:
        self._id = span_id = record.random_id()
        now = record.now_us()
        process = _process_id()
        frame = sys._getframe(1)
        record.emit("spans", {
            "process_id": process, "id": span_id, "name": "python_user_span",
            "target": "monarch::actor", "level": "INFO",
            "fields_json": json.dumps({"name": self._name, **self._attrs}, default=str),
            "timestamp_us": now, "parent_id": _current_span.get(),
            "thread_name": threading.current_thread().name,
            "file": frame.f_code.co_filename, "line": frame.f_lineno,
        })
        record.emit("span_events", {"process_id": process, "id": span_id, "timestamp_us": now,
                                    "event_type": "enter"})
        self._token = _current_span.set(span_id)
        return self._inner.__enter__() if self._inner is not None else None

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._inner.__exit__(*exc) if self._inner is not None else None
        finally:
            if self._token is not None:
                _current_span.reset(self._token)
            record.emit("span_events", {"process_id": _process_id(), "id": self._id,
                                        "timestamp_us": record.now_us(), "event_type": "exit"})


def _process_id() -> str:
    from monarch._src.runtime.runtime import runtime_if_started

    rt = runtime_if_started()
    return f"{rt.proc_id if rt is not None else 'unnamed'}:{os.getpid()}"


def _wrap(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def traced_async(*args: Any, **kwargs: Any) -> Any:
            if not tracing_active() and record.SINK is None:
                return await fn(*args, **kwargs)
            with span(name):
                return await fn(*args, **kwargs)

        return traced_async

    @functools.wraps(fn)
    def traced_sync(*args: Any, **kwargs: Any) -> Any:
        if not tracing_active() and record.SINK is None:
            return fn(*args, **kwargs)
        with span(name):
            return fn(*args, **kwargs)

    return traced_sync


@overload
def traced(fn: F) -> F: ...
@overload
def traced(fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...
def traced(fn: Any = None, *, name: str | None = None) -> Any:
    """A span per call of a sync or async function (`@traced` or `@traced(name=...)`).

    The span is named `name`, or the function's qualified name. Without OpenTelemetry the
    function is returned unchanged, so decorating costs nothing per call.
    """
    if fn is None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"traced(name=...) needs a string, got {type(name).__name__}.")
        return lambda f: traced(f, name=name)
    if not callable(fn):
        raise TypeError(f"traced() decorates a function, got {type(fn).__name__}.")
    if not OTEL:
        return fn
    return _wrap(fn, name or str(getattr(fn, "__qualname__", repr(fn))))


def tracing_active() -> bool:
    """True when spans are recorded: the application installed an OpenTelemetry tracer provider
    in this process. Until then OpenTelemetry's own proxy would drop every span, so monarch
    skips creating them."""
    trace = sys.modules.get("opentelemetry.trace")
    # A provider can only have been set by a process that imported opentelemetry.trace.
    return trace is not None and getattr(trace, "_TRACER_PROVIDER", None) is not None


def instrument_endpoint(fn: Callable[..., Any], mesh_name: str, method: str, rank: int) -> Any:
    """`fn` (a bound endpoint method) wrapped in a span `<mesh>.<method>`; only called by the
    dispatcher when `OTEL` is true."""
    attrs = {"monarch.mesh": mesh_name, "monarch.endpoint": method, "monarch.rank": rank}
    span_name = f"{mesh_name}.{method}"
    tracer = _get_tracer()
    if inspect.iscoroutinefunction(fn):

        async def endpoint_async(*args: Any, **kwargs: Any) -> Any:
            with tracer.start_as_current_span(span_name, attributes=attrs):
                return await fn(*args, **kwargs)

        return endpoint_async

    def endpoint_sync(*args: Any, **kwargs: Any) -> Any:
        with tracer.start_as_current_span(span_name, attributes=attrs):
            return fn(*args, **kwargs)

    return endpoint_sync


class _Instrument:
    """An instrument that drops what it is given (no OpenTelemetry)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def add(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        """Drop an increment."""

    def record(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        """Drop a measurement."""

    def set(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        """Drop a gauge value."""


class _Meter:
    """A meter whose instruments drop measurements (no OpenTelemetry)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def create_counter(self, name: str, *args: Any, **kwargs: Any) -> _Instrument:
        """A counter that drops increments."""
        return _Instrument(name)

    create_histogram = create_counter
    create_up_down_counter = create_counter
    create_gauge = create_counter


def get_meter(name: str = "monarch", *args: Any, **kwargs: Any) -> Any:
    """An OpenTelemetry meter called `name` (`create_counter`, `create_histogram`, ...).

    Without OpenTelemetry, a meter with the same methods whose instruments drop measurements.
    """
    if not OTEL:
        return _Meter(name)
    from opentelemetry import metrics

    return metrics.get_meter(name, *args, **kwargs)

