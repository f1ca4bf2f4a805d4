"""torchmonarch's `monarch._src.actor.telemetry`: OpenTelemetry-API metrics, spans, log forwarding.

`get_meter()` is Monarch's process-wide meter (`METER`, scope "monarch"). Its instruments are
OpenTelemetry API instruments (`Counter` is an `opentelemetry.metrics.Counter`, ...) whose
measurements go to `self.inner`, an instrument of this process's metrics registry
(`monarch._src.telemetry.metrics`): while the job's telemetry is on in the process they become
`metric_sums` / `metric_histograms` / `metric_gauges` rows, OTLP when configured, and
Prometheus text. Attribute keys and values are turned into strings first, as on Monarch (its
instruments are Rust's, which take string attributes). `install()` makes `MeterProvider` the
OpenTelemetry global one, so `opentelemetry.metrics.get_meter(...)` feeds the same registry.

Unlike Monarch, gauges and observable instruments work here (Monarch's `create_gauge` and
`create_observable_*` raise `NotImplementedError`). `span`/`traced` are `monarch.actor`'s
(OpenTelemetry spans bound to the current actor); `get_monarch_tracer()` is a no-op tracer, as
on Monarch. `TracingForwarder` and `log_with_tracing` write log records as `events` rows of the
job's telemetry (Monarch forwards them to its Rust tracing, which fills the same table).

This module needs `opentelemetry-api` (monarch's `telemetry` extra), as Monarch's does.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import opentelemetry.metrics as otel_metrics
import opentelemetry.trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackT
from opentelemetry.util.types import Attributes

from monarch._src.mesh.telemetry import span as actor_span, traced
from monarch._src.telemetry import metrics as registry, record

__all__ = [
    "METER",
    "Counter",
    "Gauge",
    "Histogram",
    "Meter",
    "MeterProvider",
    "ObservableCounter",
    "ObservableGauge",
    "ObservableUpDownCounter",
    "TracingForwarder",
    "UpDownCounter",
    "get_meter",
    "get_monarch_tracer",
    "install",
    "log_with_tracing",
    "span",
    "span_with_correlation_id",
    "traced",
]


def _strings(attributes: Attributes | None) -> dict[str, str] | None:
    """Monarch's attribute conversion: keys and values as strings; None when empty."""
    if not attributes:
        return None
    return {str(k): str(v) for k, v in attributes.items()}


class Counter(otel_metrics.Counter):
    """A monotonic counter (`metric_sums`, `sum_u64`): `add(amount, attributes)`."""

    inner: Any  # the registry's metrics.Counter the measurements go to

    def __init__(self, name: str, unit: str = "", description: str = "", *,
                 scope: str = "monarch") -> None:
        # OpenTelemetry's instrument base classes keep nothing: no super().__init__ to call.
        self.inner = registry.get_meter(scope).create_counter(name, unit, description)

    def add(self, amount: int | float, attributes: Attributes | None = None,
            context: Context | None = None) -> None:
        """Add `amount` (an integer, as on Monarch) to the series of `attributes`."""
        self.inner.add(int(amount), attributes=_strings(attributes))


class UpDownCounter(otel_metrics.UpDownCounter):
    """A counter that goes up and down (`metric_sums`, `sum_i64`)."""

    inner: Any  # the registry's metrics.UpDownCounter

    def __init__(self, name: str, unit: str = "", description: str = "", *,
                 scope: str = "monarch") -> None:
        self.inner = registry.get_meter(scope).create_up_down_counter(name, unit, description)

    def add(self, amount: int | float, attributes: Attributes | None = None,
            context: Context | None = None) -> None:
        """Add `amount` (an integer; negative goes down)."""
        self.inner.add(int(amount), attributes=_strings(attributes))


class Histogram(otel_metrics.Histogram):
    """A histogram (`metric_histograms`, f64 columns)."""

    inner: Any  # the registry's metrics.Histogram

    def __init__(self, name: str, unit: str = "", description: str = "", *,
                 scope: str = "monarch",
                 explicit_bucket_boundaries_advisory: Sequence[float] | None = None) -> None:
        self.inner = registry.get_meter(scope).create_histogram(
            name, unit, description,
            explicit_bucket_boundaries_advisory=explicit_bucket_boundaries_advisory)

    def record(self, amount: int | float, attributes: Attributes | None = None,
               context: Context | None = None) -> None:
        """Record one measurement."""
        self.inner.record(amount, attributes=_strings(attributes))


class Gauge(otel_metrics._Gauge):
    """A gauge: the last value set per series (`metric_gauges`)."""

    inner: Any  # the registry's metrics.Gauge

    def __init__(self, name: str, unit: str = "", description: str = "", *,
                 scope: str = "monarch") -> None:
        self.inner = registry.get_meter(scope).create_gauge(name, unit, description)

    def set(self, amount: int | float, attributes: Attributes | None = None,
            context: Context | None = None) -> None:
        """Set the series' value."""
        self.inner.set(amount, attributes=_strings(attributes))


class ObservableCounter(otel_metrics.ObservableCounter):
    """A counter whose callbacks report running totals at each export."""

    def __init__(self, name: str, callbacks: Sequence[CallbackT] | None = None,
                 unit: str = "", description: str = "", *, scope: str = "monarch") -> None:
        super().__init__(name, unit=unit, description=description)
        self.inner = registry.get_meter(scope).create_observable_counter(
            name, callbacks, unit, description)


class ObservableUpDownCounter(otel_metrics.ObservableUpDownCounter):
    """An up-down counter whose callbacks report running totals at each export."""

    def __init__(self, name: str, callbacks: Sequence[CallbackT] | None = None,
                 unit: str = "", description: str = "", *, scope: str = "monarch") -> None:
        super().__init__(name, unit=unit, description=description)
        self.inner = registry.get_meter(scope).create_observable_up_down_counter(
            name, callbacks, unit, description)


class ObservableGauge(otel_metrics.ObservableGauge):
    """A gauge whose callbacks report values at each export."""

    def __init__(self, name: str, callbacks: Sequence[CallbackT] | None = None,
                 unit: str = "", description: str = "", *, scope: str = "monarch") -> None:
        super().__init__(name, unit=unit, description=description)
        self.inner = registry.get_meter(scope).create_observable_gauge(
            name, callbacks, unit, description)


class Meter(otel_metrics.Meter):
    """An OpenTelemetry meter whose instruments feed this process's metrics registry; its
    name is the rows' `scope_name`."""

    def create_counter(self, name: str, unit: str = "",
                       description: str = "") -> otel_metrics.Counter:
        return Counter(name, unit, description, scope=self.name)

    def create_up_down_counter(self, name: str, unit: str = "",
                               description: str = "") -> otel_metrics.UpDownCounter:
        return UpDownCounter(name, unit, description, scope=self.name)

    def create_histogram(self, name: str, unit: str = "", description: str = "", *,
                         explicit_bucket_boundaries_advisory: Sequence[float] | None = None,
                         ) -> otel_metrics.Histogram:
        return Histogram(name, unit, description, scope=self.name,
                         explicit_bucket_boundaries_advisory=explicit_bucket_boundaries_advisory)

    def create_gauge(self, name: str, unit: str = "",
                     description: str = "") -> otel_metrics._Gauge:
        return Gauge(name, unit, description, scope=self.name)

    def create_observable_counter(self, name: str, callbacks: Sequence[CallbackT] | None = None,
                                  unit: str = "",
                                  description: str = "") -> otel_metrics.ObservableCounter:
        return ObservableCounter(name, callbacks, unit, description, scope=self.name)

    def create_observable_up_down_counter(
            self, name: str, callbacks: Sequence[CallbackT] | None = None, unit: str = "",
            description: str = "") -> otel_metrics.ObservableUpDownCounter:
        return ObservableUpDownCounter(name, callbacks, unit, description, scope=self.name)

    def create_observable_gauge(self, name: str, callbacks: Sequence[CallbackT] | None = None,
                                unit: str = "",
                                description: str = "") -> otel_metrics.ObservableGauge:
        return ObservableGauge(name, callbacks, unit, description, scope=self.name)


class MeterProvider(otel_metrics.MeterProvider):
    """Hands out `Meter`s (what `install()` makes OpenTelemetry's global provider)."""

    def get_meter(self, name: str, version: str | None = None, schema_url: str | None = None,
                  attributes: Attributes | None = None) -> otel_metrics.Meter:
        return Meter(name, version, schema_url)


METER: otel_metrics.Meter = Meter("monarch")
_TRACER: otel_trace.Tracer = otel_trace.NoOpTracer()
_INSTALL_LOCK = threading.Lock()
_installed = False  # True once install() set the global meter provider


def get_meter() -> otel_metrics.Meter:
    """Monarch's process-wide meter (scope "monarch")."""
    return METER


def get_monarch_tracer() -> otel_trace.Tracer:
    """A no-op tracer, as on Monarch (kept for older call sites); use `span()`."""
    return _TRACER


def install() -> None:
    """Make `MeterProvider` OpenTelemetry's global meter provider, so meters from
    `opentelemetry.metrics.get_meter()` feed this process's metrics too (once; OpenTelemetry
    allows one global provider per process)."""
    global METER, _installed
    with _INSTALL_LOCK:
        if _installed:
            return
        otel_metrics.set_meter_provider(MeterProvider())
        METER = otel_metrics.get_meter("monarch")
        _installed = True


def span(name: str) -> AbstractContextManager[Any]:
    """A span called `name` around a `with` block, bound to the current actor."""
    return actor_span(name)


def span_with_correlation_id(name: str,
                             correlation_id: int | None = None) -> AbstractContextManager[Any]:
    """`span(name)` carrying `correlation_id` (an RPC flow's id) as an attribute."""
    attributes = None if correlation_id is None else {"correlation_id": correlation_id}
    return actor_span(name, attributes)


_LEVELS = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
           logging.ERROR: "ERROR", logging.CRITICAL: "ERROR"}


def forward_to_tracing(log: logging.LogRecord) -> None:
    """Write `log` as an `events` row of the job's telemetry (nothing when it is off)."""
    if record.SINK is None:
        return
    fields: dict[str, Any] = {"message": log.getMessage()}
    actor_id = getattr(log, "actor_id", None)
    if actor_id is not None:
        fields["actor_id"] = str(actor_id)
    record.emit("events", {
        "name": f"event {log.pathname}:{log.lineno}", "target": log.name,
        "level": _LEVELS.get(log.levelno, "INFO"),
        "fields_json": json.dumps(fields, separators=(",", ":")),
        "timestamp_us": int(log.created * 1_000_000), "parent_span": None,
        "thread_id": str(log.thread or threading.get_ident()),
        "thread_name": log.threadName or threading.current_thread().name,
        "module_path": log.module, "file": os.path.basename(log.pathname), "line": log.lineno})


def _current_actor_name() -> str | None:
    from monarch._src.mesh.context import current_actor_name, current_hosted

    return None if current_hosted() is None else current_actor_name()


class TracingForwarder(logging.Handler):
    """A logging handler that forwards each record to the telemetry `events` table, with the
    current actor's name as `actor_id` when there is one."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            name = _current_actor_name()
        except Exception:
            name = None  # outside the runtime (a plain script): the record has no actor
        if name is not None:
            record.actor_id = name
        forward_to_tracing(record)


def log_with_tracing(level: int, msg: object, *args: object, stack_info: bool = False,
                     stacklevel: int = 1, extra: dict[str, object] | None = None,
                     logger: logging.Logger | None = None) -> None:
    """Log through `logger`'s handlers (this module's logger by default) and also write the
    record to the telemetry `events` table, whatever handlers the logger has; the record names
    this function's caller as its source."""
    logger = logger or logging.getLogger(__name__)
    fn, lno, func, sinfo = logger.findCaller(stack_info=stack_info, stacklevel=stacklevel + 1)
    log = logger.makeRecord(logger.name, level, fn, lno, msg, args, None, func, extra=extra,
                            sinfo=sinfo)
    logger.handle(log)
    forward_to_tracing(log)


