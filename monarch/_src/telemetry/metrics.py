"""Metrics: counters, up-down counters, histograms and gauges, aggregated in the process and
exported as telemetry rows, over OTLP and as Prometheus text.

Every process has one registry of instruments: the ones users create through a meter
(`get_meter(scope).create_counter(name)`, which `monarch.actor.get_meter()` reaches through
the OpenTelemetry API wrappers of `monarch._src.actor.telemetry`) and the runtime's built-in
ones, fed by the plain functions at the end of this module (`message_posted`, `handler_done`,
...). A measurement updates its series' aggregate (a series is one set of attribute values)
under the instrument's lock; nothing else happens on the caller's thread.

While metrics are on in the process (`start`, called when the job's telemetry starts there),
the export thread drains every aggregate each `EXPORT_S` seconds into *delta* rows of
`metric_sums`, `metric_gauges` and `metric_histograms` (torchmonarch's columns,
`record.SCHEMAS`) and hands them to `record.emit` (the job's SQL tables). The same rows are
folded into the process's running totals (`prometheus.Totals`: the `/metrics` text) and, when
`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` is set, sent over
OTLP/HTTP (`otlp.py`). While metrics are off a measurement is dropped after one global read.

Rejected: the OpenTelemetry SDK's `MeterProvider` as the aggregator, which the runtime would
call on every message. Its `Counter.add` costs about 10 us with a delta and a cumulative reader
on the machine this was measured on, against about 0.4 us for the update here. The rows keep
OpenTelemetry's data model (delta temporality, explicit-bucket histograms, resource
attributes), and OTLP export goes through the SDK's own exporter, so a collector sees ordinary
OpenTelemetry metrics.
"""

from __future__ import annotations

import atexit
import bisect
import importlib.metadata
import inspect
import itertools
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from monarch._src.telemetry import record
from monarch._src.telemetry.prometheus import Totals, serve_text

__all__ = [
    "DEFAULT_BOUNDS",
    "EXPORT_S",
    "RUNTIME_SCOPE",
    "CallbackOptions",
    "Counter",
    "Gauge",
    "Histogram",
    "Meter",
    "Observable",
    "UpDownCounter",
    "actor_failed",
    "flush",
    "get_meter",
    "handler_done",
    "message_dequeued",
    "message_posted",
    "message_queued",
    "proc_failed",
    "prometheus_text",
    "running",
    "serve_prometheus",
    "start",
    "stop",
]

logger = logging.getLogger(__name__)

EXPORT_S = 1.0  # a measurement reaches the rows (and OTLP) within about this long
# OpenTelemetry's default explicit bucket bounds (torchmonarch's histograms use them too).
DEFAULT_BOUNDS: tuple[float, ...] = (0.0, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0, 250.0, 500.0,
                                     750.0, 1000.0, 2500.0, 5000.0, 7500.0, 10000.0)
# Handler time in nanoseconds: 10 us to 100 s (the default bounds would put every call in +Inf).
HANDLER_NS_BOUNDS: tuple[float, ...] = (1e4, 2.5e4, 5e4, 1e5, 2.5e5, 5e5, 1e6, 2.5e6, 5e6,
                                        1e7, 2.5e7, 5e7, 1e8, 2.5e8, 5e8, 1e9, 1e10, 1e11)
# The scope of the runtime's built-in instruments: torchmonarch's, for the same metric names,
# so queries written against its tables (`WHERE scope_name = ...`) carry over.
RUNTIME_SCOPE = "hyperactor::metrics"

AttrKey = tuple[Any, ...]  # a series: attribute values (fixed names) or sorted (name, value)s


def _check_attributes(instrument: str, attributes: Any) -> None:
    if attributes is not None and not isinstance(attributes, (dict, Mapping)):
        raise TypeError(f"Instrument {instrument!r} takes its attributes as a dict, got "
                        f"{type(attributes).__name__}.")


def _attr_key(instrument: str, attributes: Mapping[str, Any] | None) -> AttrKey:
    if not attributes:
        return ()
    _check_attributes(instrument, attributes)
    return tuple(sorted((str(k), str(v)) for k, v in attributes.items()))


def _check_number(instrument: str, amount: Any) -> None:
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise TypeError(f"Instrument {instrument!r} records numbers, got "
                        f"{type(amount).__name__}.")


class Instrument:
    """One named instrument of a meter; its aggregates per series wait here for the export."""

    kind = ""  # "sum", "gauge" or "histogram": which table its rows go to

    def __init__(self, name: str, scope: str, unit: str = "", description: str = "",
                 attr_names: tuple[str, ...] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"An instrument needs a non-empty name string, got {name!r}.")
        if not isinstance(unit, str) or not isinstance(description, str):
            raise TypeError(f"Instrument {name!r} takes unit and description as strings.")
        self.name = name
        self.scope = scope
        self.unit = unit
        self.description = description
        # The attribute names of every series when fixed (the runtime's instruments: their
        # keys are the values alone); None when each key is its sorted (name, value) pairs.
        self.attr_names = attr_names
        self._lock = threading.Lock()
        self._pending: dict[AttrKey, Any] = {}  # the aggregates since the last export

    def attributes(self, key: AttrKey) -> dict[str, str]:
        """The attributes of series `key`."""
        if self.attr_names is not None:
            return dict(zip(self.attr_names, key, strict=True))
        return dict(key)

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock, nothing pending."""
        self._lock = threading.Lock()
        self._pending = {}

    def drain(self) -> dict[AttrKey, Any]:
        """Take the aggregates since the last export (the export thread calls this)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return pending

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} scope={self.scope!r}>"


class _Sum(Instrument):
    kind = "sum"
    monotonic = True

    def _bump(self, key: AttrKey, amount: int) -> None:
        with self._lock:
            pending = self._pending
            pending[key] = pending.get(key, 0) + amount


class Counter(_Sum):
    """A monotonic integer sum (`metric_sums.sum_u64`); `add` takes amounts >= 0."""

    def add(self, amount: float, attributes: Mapping[str, Any] | None = None) -> None:
        """Add `amount` (truncated to an integer, as torchmonarch's counters do)."""
        _check_number(self.name, amount)
        if amount < 0:
            raise ValueError(f"Counter {self.name!r} only goes up, got {amount}; use an "
                             f"UpDownCounter for amounts that go down.")
        if _EXPORTER is None:
            _check_attributes(self.name, attributes)  # refused while off too, but not keyed
            return
        self._bump(_attr_key(self.name, attributes), int(amount))


class UpDownCounter(_Sum):
    """A non-monotonic integer sum (`metric_sums.sum_i64`), e.g. a queue's depth."""

    monotonic = False

    def add(self, amount: float, attributes: Mapping[str, Any] | None = None) -> None:
        """Add `amount` (negative goes down; truncated to an integer)."""
        _check_number(self.name, amount)
        if _EXPORTER is None:
            _check_attributes(self.name, attributes)  # refused while off too, but not keyed
            return
        self._bump(_attr_key(self.name, attributes), int(amount))


class Histogram(Instrument):
    """Explicit-bucket histogram; `integer` ones report u64 columns, others f64."""

    kind = "histogram"

    def __init__(self, name: str, scope: str, unit: str = "", description: str = "",
                 attr_names: tuple[str, ...] | None = None,
                 bounds: Iterable[float] | None = None, integer: bool = False) -> None:
        super().__init__(name, scope, unit, description, attr_names)
        bounds = DEFAULT_BOUNDS if bounds is None else tuple(float(b) for b in bounds)
        if any(b >= c for b, c in itertools.pairwise(bounds)):
            raise ValueError(f"Histogram {name!r} needs strictly increasing bucket bounds, got "
                             f"{list(bounds)}.")
        self.bounds = bounds
        self.integer = integer

    def record(self, amount: float, attributes: Mapping[str, Any] | None = None) -> None:
        """Record one measurement."""
        _check_number(self.name, amount)
        if _EXPORTER is None:
            _check_attributes(self.name, attributes)  # refused while off too, but not keyed
            return
        self._observe(_attr_key(self.name, attributes), amount)

    def _observe(self, key: AttrKey, amount: float) -> None:
        bucket = bisect.bisect_left(self.bounds, amount)  # bucket i holds (bounds[i-1], bounds[i]]
        with self._lock:
            agg = self._pending.get(key)
            if agg is None:
                counts = [0] * (len(self.bounds) + 1)
                counts[bucket] = 1
                self._pending[key] = [1, amount, amount, amount, counts]
                return
            agg[0] += 1
            agg[1] += amount
            if amount < agg[2]:
                agg[2] = amount
            if amount > agg[3]:
                agg[3] = amount
            agg[4][bucket] += 1


class Gauge(Instrument):
    """The last value set per series (`metric_gauges`)."""

    kind = "gauge"

    def set(self, amount: float, attributes: Mapping[str, Any] | None = None) -> None:
        """Set the series' value."""
        _check_number(self.name, amount)
        if _EXPORTER is None:
            _check_attributes(self.name, attributes)
            return
        key = _attr_key(self.name, attributes)
        with self._lock:
            self._pending[key] = amount


@dataclass(frozen=True)
class CallbackOptions:
    """What an observable instrument's callback is given (OpenTelemetry's `CallbackOptions`)."""

    timeout_millis: float = 10_000


class Observable(Instrument):
    """An observable counter, up-down counter or gauge: its callbacks are called at each export
    and yield observations (objects with `.value` and `.attributes`, such as OpenTelemetry's
    `Observation`). Counters observe running totals; their rows carry the change since the
    previous export, and a series that did not change gives no row."""

    def __init__(self, name: str, scope: str, kind: str, callbacks: Iterable[Any] | None,
                 unit: str = "", description: str = "", monotonic: bool = True) -> None:
        super().__init__(name, scope, unit, description)
        self.kind = kind
        self.monotonic = monotonic
        # (callback, True for a generator that is sent the options, False for a function)
        self.callbacks: list[tuple[Any, bool]] = []
        for callback in callbacks or ():
            generator = inspect.isgenerator(callback)
            if generator:
                next(callback)  # OpenTelemetry's generator callbacks start primed
            elif not callable(callback):
                raise TypeError(f"Observable instrument {name!r} takes callables or generators "
                                f"as callbacks, got {type(callback).__name__}.")
            self.callbacks.append((callback, generator))
        self._last: dict[AttrKey, float] = {}  # counters: the totals observed at the last export

    def reset_after_fork(self) -> None:
        super().reset_after_fork()
        self._last = {}

    def drain(self) -> dict[AttrKey, Any]:
        options = CallbackOptions()
        observed: dict[AttrKey, Any] = {}
        for callback, generator in self.callbacks:
            try:
                found = callback.send(options) if generator else callback(options)
                for observation in found or ():
                    observed[_attr_key(self.name, observation.attributes)] = observation.value
            except Exception:
                # A user's callback must not stop the export of everything else.
                logger.exception("callback of observable instrument %r failed", self.name)
        if self.kind == "gauge":
            return observed
        changes = {}
        for key, total in observed.items():
            change = total - self._last.get(key, 0)
            self._last[key] = total
            if change:
                changes[key] = change
        return changes


class Meter:
    """The instruments of one scope (`scope_name` in the rows); `get_meter(scope)` gives it."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self._instruments: dict[tuple[str, str], Instrument] = {}
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock."""
        self._lock = threading.Lock()

    def _get(self, kind: str, name: str, make: Callable[[], Instrument]) -> Any:
        # One instrument per (kind, name): creating it twice returns the first (as the
        # OpenTelemetry SDK does), so both handles feed the same series.
        with self._lock:
            found = self._instruments.get((kind, name))
            if found is None:
                found = self._instruments[(kind, name)] = make()
                with _REGISTRY_LOCK:
                    _REGISTRY.append(found)
        return found

    def create_counter(self, name: str, unit: str = "", description: str = "") -> Counter:
        """A monotonic integer counter."""
        return self._get("counter", name,  # type: ignore[no-any-return]
                         lambda: Counter(name, self.scope, unit, description))

    def create_up_down_counter(self, name: str, unit: str = "",
                               description: str = "") -> UpDownCounter:
        """An integer counter that goes up and down."""
        return self._get("updown", name,  # type: ignore[no-any-return]
                         lambda: UpDownCounter(name, self.scope, unit, description))

    def create_histogram(self, name: str, unit: str = "", description: str = "", *,
                         explicit_bucket_boundaries_advisory: Iterable[float] | None = None,
                         ) -> Histogram:
        """A histogram, with OpenTelemetry's default bucket bounds unless
        `explicit_bucket_boundaries_advisory` gives others."""
        return self._get("histogram", name,  # type: ignore[no-any-return]
                         lambda: Histogram(name, self.scope, unit, description,
                                           bounds=explicit_bucket_boundaries_advisory))

    def create_gauge(self, name: str, unit: str = "", description: str = "") -> Gauge:
        """A gauge holding the last value set per series."""
        return self._get("gauge", name,  # type: ignore[no-any-return]
                         lambda: Gauge(name, self.scope, unit, description))

    def create_observable_counter(self, name: str, callbacks: Iterable[Any] | None = None,
                                  unit: str = "", description: str = "") -> Observable:
        """A counter whose callbacks report running totals at each export."""
        return self._get("obs-counter", name,  # type: ignore[no-any-return]
                         lambda: Observable(name, self.scope, "sum", callbacks, unit,
                                            description))

    def create_observable_up_down_counter(self, name: str,
                                          callbacks: Iterable[Any] | None = None,
                                          unit: str = "", description: str = "") -> Observable:
        """An up-down counter whose callbacks report running totals at each export."""
        return self._get("obs-updown", name,  # type: ignore[no-any-return]
                         lambda: Observable(name, self.scope, "sum", callbacks, unit,
                                            description, monotonic=False))

    def create_observable_gauge(self, name: str, callbacks: Iterable[Any] | None = None,
                                unit: str = "", description: str = "") -> Observable:
        """A gauge whose callbacks report values at each export."""
        return self._get("obs-gauge", name,  # type: ignore[no-any-return]
                         lambda: Observable(name, self.scope, "gauge", callbacks, unit,
                                            description))


_REGISTRY: list[Instrument] = []  # every instrument of the process, in creation order
_REGISTRY_LOCK = threading.Lock()
_METERS: dict[str, Meter] = {}


def get_meter(scope: str = "monarch") -> Meter:
    """The process's meter for `scope` (the same object for the same scope)."""
    if not isinstance(scope, str) or not scope:
        raise TypeError(f"get_meter() needs a non-empty scope name string, got {scope!r}.")
    with _REGISTRY_LOCK:
        meter = _METERS.get(scope)
        if meter is None:
            meter = _METERS[scope] = Meter(scope)
    return meter


# The runtime's instruments (Monarch's metric names and attributes where it has them).
_RUNTIME = get_meter(RUNTIME_SCOPE)
_POSTS = _RUNTIME._get("counter", "mailbox.posts", lambda: Counter(
    "mailbox.posts", RUNTIME_SCOPE, attr_names=("actor_id", "dest_actor_id")))
_QUEUE = _RUNTIME._get("updown", "actor.message_queue_size", lambda: UpDownCounter(
    "actor.message_queue_size", RUNTIME_SCOPE, attr_names=("actor_id",)))
_RECEIVED = _RUNTIME._get("counter", "actor.messages_received", lambda: Counter(
    "actor.messages_received", RUNTIME_SCOPE, attr_names=("actor_id", "endpoint")))
_HANDLER_NS = _RUNTIME._get("histogram", "actor.message_handler_duration.ns", lambda: Histogram(
    "actor.message_handler_duration.ns", RUNTIME_SCOPE, "ns", attr_names=("actor_id", "endpoint"),
    bounds=HANDLER_NS_BOUNDS, integer=True))
_HANDLER_ERRORS = _RUNTIME._get("counter", "actor.message_handler_errors", lambda: Counter(
    "actor.message_handler_errors", RUNTIME_SCOPE, attr_names=("actor_id", "endpoint")))
_ACTOR_FAILURES = _RUNTIME._get("counter", "proc_mesh.actor_failures", lambda: Counter(
    "proc_mesh.actor_failures", RUNTIME_SCOPE, attr_names=("actor_id",)))
_PROC_FAILURES = _RUNTIME._get("counter", "proc_mesh.proc_failures", lambda: Counter(
    "proc_mesh.proc_failures", RUNTIME_SCOPE, attr_names=("proc_id",)))


def message_posted(actor_id: str, dest_actor_id: str) -> None:
    """A message from `actor_id` was posted to `dest_actor_id` (`mailbox.posts`)."""
    if _EXPORTER is not None:
        _POSTS._bump((actor_id, dest_actor_id), 1)


def message_queued(actor_id: str) -> None:
    """A message joined `actor_id`'s queue (`actor.message_queue_size` + 1)."""
    if _EXPORTER is not None:
        _QUEUE._bump((actor_id,), 1)


def message_dequeued(actor_id: str) -> None:
    """A message left `actor_id`'s queue for its handler (`actor.message_queue_size` - 1)."""
    if _EXPORTER is not None:
        _QUEUE._bump((actor_id,), -1)


def handler_done(actor_id: str, endpoint: str, seconds: float, ok: bool) -> None:
    """`actor_id`'s handler of `endpoint` ran for `seconds` and raised unless `ok`
    (`actor.messages_received`, `actor.message_handler_duration.ns`,
    `actor.message_handler_errors`)."""
    if _EXPORTER is not None:
        key = (actor_id, endpoint)
        _RECEIVED._bump(key, 1)
        _HANDLER_NS._observe(key, int(seconds * 1e9))
        if not ok:
            _HANDLER_ERRORS._bump(key, 1)


def actor_failed(actor_id: str) -> None:
    """Actor `actor_id` failed (`proc_mesh.actor_failures`)."""
    if _EXPORTER is not None:
        _ACTOR_FAILURES._bump((actor_id,), 1)


def proc_failed(proc_id: str) -> None:
    """Proc `proc_id` stopped abnormally (`proc_mesh.proc_failures`)."""
    if _EXPORTER is not None:
        _PROC_FAILURES._bump((proc_id,), 1)


def _sdk_version() -> str:
    for dist in ("opentelemetry-sdk", "opentelemetry-api"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def resource_attributes(service_name: str) -> dict[str, str]:
    """The resource attributes of this process's rows (OpenTelemetry's semantic conventions).
    `service.instance.id` is new for each `start`: processes sharing a service name stay
    separate series (an OTLP backend would otherwise see two running totals for one series)."""
    attrs = {"service.name": service_name, "service.instance.id": uuid.uuid4().hex,
             "telemetry.sdk.language": "python",
             "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.version": _sdk_version(),
             "telemetry.distro.name": "monarch"}
    return {k: v for k, v in attrs.items() if v}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _number_columns(prefix: str, value: float, integer: bool, signed: bool) -> dict[str, Any]:
    """`{prefix}_f64/_i64/_u64` with `value` in the one its type picks and None in the others."""
    column = "f64" if not integer else ("i64" if signed or value < 0 else "u64")
    cols: dict[str, Any] = {f"{prefix}_{kind}": None for kind in ("f64", "i64", "u64")}
    cols[f"{prefix}_{column}"] = value if column != "f64" else float(value)
    return cols


class _Exporter:
    """The export thread of a process whose metrics are on (see the module doc)."""

    def __init__(self, service_name: str, export_s: float) -> None:
        self.service_name = service_name
        self.export_s = export_s
        self.resource_json = _dumps(resource_attributes(service_name))
        self.totals = Totals()  # the running totals of every row exported (Prometheus text)
        self.last_us = record.now_us()  # the start of the interval being aggregated
        self.otlp: Any = None  # an otlp.Sender while OTLP export is configured
        if (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")):
            from monarch._src.telemetry import otlp

            self.otlp = otlp.open_sender()
        self._lock = threading.Lock()  # one export at a time (the thread, flush, stop)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monarch-metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.export_s):
            try:
                self.export()
            except Exception:
                # A broken export (a user's instrument, the OTLP endpoint) must not end the
                # thread: the next interval tries again.
                logger.exception("metrics export failed")

    def rows(self, now: int) -> list[tuple[str, dict[str, Any]]]:
        """Drain every instrument into delta rows for the interval ending at `now`."""
        with _REGISTRY_LOCK:
            instruments = list(_REGISTRY)
        common = {"timestamp_us": now, "start_timestamp_us": self.last_us,
                  "resource_attributes_json": self.resource_json}
        rows: list[tuple[str, dict[str, Any]]] = []
        for inst in instruments:
            pending = inst.drain()
            for key, agg in pending.items():
                row = {"name": inst.name, "scope_name": inst.scope, "unit": inst.unit,
                       "attributes_json": _dumps(inst.attributes(key)), **common}
                if inst.kind == "sum":
                    monotonic = getattr(inst, "monotonic", True)
                    row.update(temporality="delta", is_monotonic=monotonic,
                               **_number_columns("sum", agg, isinstance(agg, int),
                                                 not monotonic))
                    rows.append(("metric_sums", row))
                elif inst.kind == "gauge":
                    row.update(_number_columns("value", agg, isinstance(agg, int), True))
                    rows.append(("metric_gauges", row))
                else:
                    count, total, low, high, counts = agg
                    integer = getattr(inst, "integer", False)
                    row.update(temporality="delta", count=count,
                               bounds_json=_dumps(list(getattr(inst, "bounds", ()))),
                               bucket_counts_json=_dumps(counts))
                    for prefix, value in (("sum", total), ("min", low), ("max", high)):
                        row.update(_number_columns(prefix, value, integer, False))
                    rows.append(("metric_histograms", row))
        self.last_us = now
        return rows

    def export(self) -> list[tuple[str, dict[str, Any]]]:
        """One export: the interval's rows to the telemetry sink, the totals and OTLP."""
        with self._lock:
            rows = self.rows(record.now_us())
            for table, row in rows:
                record.emit(table, row)
                self.totals.fold(table, row)
            if self.otlp is not None:
                self.otlp.send(rows, self.totals)
            return rows

    def close(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self.export()
        if self.otlp is not None:
            self.otlp.close()


_EXPORTER: _Exporter | None = None  # this process's export thread while metrics are on
_START_LOCK = threading.Lock()


def start(service_name: str, *, export_s: float = EXPORT_S) -> None:
    """Turn metrics on in this process: rows every `export_s` seconds to the telemetry sink
    (`record.emit`), OTLP when configured, totals for `prometheus_text`. `service_name` is the
    rows' `service.name` resource attribute. Calling it again while on changes nothing."""
    global _EXPORTER
    if not isinstance(service_name, str) or not service_name:
        raise TypeError(f"metrics.start() needs a service name string, got {service_name!r}.")
    if isinstance(export_s, bool) or not isinstance(export_s, (int, float)) or export_s <= 0:
        raise ValueError(f"metrics.start(export_s=...) needs a positive number of seconds, got "
                         f"{export_s!r}.")
    with _START_LOCK:
        if _EXPORTER is None:
            for inst in list(_REGISTRY):
                inst.drain()  # nothing is pending while off, but a stop may have raced an add
            _EXPORTER = _Exporter(service_name, float(export_s))


def running() -> bool:
    """True while metrics are on in this process."""
    return _EXPORTER is not None


def flush() -> list[tuple[str, dict[str, Any]]]:
    """Export what was measured since the last export now; returns the rows (none when off)."""
    exporter = _EXPORTER
    return exporter.export() if exporter is not None else []


def stop() -> None:
    """Export what is left and turn metrics off in this process (measurements are dropped
    again); a later `start` begins from zero."""
    global _EXPORTER
    with _START_LOCK:
        exporter, _EXPORTER = _EXPORTER, None
    if exporter is not None:
        exporter.close()


def prometheus_text() -> str:
    """This process's metrics in Prometheus' text format (exported first, so it is current);
    empty while metrics are off."""
    exporter = _EXPORTER
    if exporter is None:
        return ""
    exporter.export()
    return exporter.totals.text()


def serve_prometheus(host: str = "127.0.0.1",
                     port: int = 0) -> tuple[str, Callable[[], None]]:
    """Serve this process's `prometheus_text()` at `http://host:port/metrics` (`port` 0 picks a
    free one) for a Prometheus to scrape; returns the URL and a function that stops serving."""
    return serve_text(prometheus_text, host, port)


@atexit.register
def _export_at_exit() -> None:
    # Registered after `record`'s own flush (which atexit runs after this one), so the last
    # rows still reach the collector.
    exporter = _EXPORTER
    if exporter is not None:
        try:
            exporter.export()
        except Exception:
            # The interpreter is going away; a failed last export must not mask its exit.
            logger.debug("last metrics export failed", exc_info=True)


def _after_fork_in_child() -> None:
    # A forked child (a zygote's proc) inherits the parent's exporter but not its thread, and
    # possibly a lock some other thread of the parent held: it starts with metrics off, fresh
    # locks and nothing pending, so its own `start` begins a real export.
    global _EXPORTER, _REGISTRY_LOCK, _START_LOCK
    _EXPORTER = None
    _REGISTRY_LOCK = threading.Lock()
    _START_LOCK = threading.Lock()
    for inst in _REGISTRY:
        inst.reset_after_fork()
    for meter in _METERS.values():
        meter.reset_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
