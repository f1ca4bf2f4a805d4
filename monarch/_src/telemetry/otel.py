"""The OpenTelemetry API's meter and instrument types over this process's metrics registry.

`Meter` is an `opentelemetry.metrics.Meter` whose instruments (`Counter` is an
`opentelemetry.metrics.Counter`, ...) hand each measurement to `self.inner`, the registry's
instrument of the same name (`metrics.py`), after turning attribute keys and values into
strings, as Monarch does (its instruments are Rust's, which take string attributes).
`get_meter()` is the process-wide meter of scope "monarch" (`monarch.actor.get_meter()`);
`install()` makes `MeterProvider` OpenTelemetry's global provider. Unlike Monarch's, gauges and
observable instruments work. torchmonarch's `monarch._src.actor.telemetry` re-exports these.

Needs `opentelemetry-api`; only imported by whoever asks for these types.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import opentelemetry.metrics as otel_metrics
import opentelemetry.trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackT
from opentelemetry.util.types import Attributes

from monarch._src.telemetry import metrics as registry

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
    "UpDownCounter",
    "get_meter",
    "get_monarch_tracer",
    "install",
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
