"""torchmonarch's `monarch._src.actor.telemetry`: OpenTelemetry-API metrics, spans, log forwarding.

`get_meter()` is Monarch's process-wide meter (`METER`, scope "monarch"). Its instruments are
OpenTelemetry API instruments (`Counter` is an `opentelemetry.metrics.Counter`, ...) whose
measurements go to `self.inner`, an instrument of this process's metrics registry
(`monarch._src.telemetry.metrics`): while the job's telemetry is on in the process they become
`metric_sums` / `metric_histograms` / `metric_gauges` rows, OTLP when configured, and
Prometheus text. Attribute keys and values are turned into strings first, as on Monarch (its
instruments are Rust's, which take string attributes). `install()` makes `MeterProvider` the
OpenTelemetry global one, so `opentelemetry.metrics.get_meter(...)` feeds the same registry.
These types live in `monarch._src.telemetry.otel` (below the mesh layer, so `monarch.actor`
imports them without importing this facade); this module re-exports them.

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
from contextlib import AbstractContextManager
from typing import Any

from monarch._src.mesh.telemetry import span as actor_span, traced
from monarch._src.telemetry import record
from monarch._src.telemetry.otel import (
    METER,
    Counter,
    Gauge,
    Histogram,
    Meter,
    MeterProvider,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
    get_meter,
    get_monarch_tracer,
    install,
)

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


