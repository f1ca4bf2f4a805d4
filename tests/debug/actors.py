"""Actors used by the debugger and admin tests (importable by procs, so pdb shows real files)."""

from __future__ import annotations

import threading
from typing import Any

from monarch.actor import Actor, endpoint

# One per proc: set by Gate.release, waited on by Gate.block (two actor meshes, one proc).
_gate = threading.Event()


class Paused(Actor):
    """An endpoint that stops at breakpoint() with a local to inspect and change."""

    @endpoint
    def compute(self, x: int) -> int:
        doubled = x * 2
        breakpoint()  # noqa: T100 - the debugger under test stops here
        return doubled + 1

    @endpoint
    def fail(self, x: int) -> int:
        local_value = x + 1
        raise ValueError(f"bad value {local_value}")

    @endpoint
    def ping(self) -> str:
        return "pong"


class StopsThenFails(Actor):
    """An endpoint that stops at breakpoint(), then raises: debugged post-mortem in the same
    session."""

    @endpoint
    def run(self, x: int) -> int:
        local_value = x + 1
        breakpoint()  # noqa: T100 - the debugger under test stops here
        raise ValueError(f"failed after stop {local_value}")

    @endpoint
    def actor_name(self) -> str:
        from monarch.actor import context

        return context().actor_instance.actor_id.actor_name


class AsyncPaused(Actor):
    """An async endpoint that stops at breakpoint()."""

    @endpoint
    async def compute(self, x: int) -> int:
        tripled = x * 3
        breakpoint()  # noqa: T100 - the debugger under test stops here
        return tripled


class Gate(Actor):
    """`block` waits (bounded) on a per-proc event that `release`, sent to another actor on the
    same proc, sets."""

    @endpoint
    def block(self) -> bool:
        released = _gate.wait(timeout=30)
        _gate.clear()
        return released

    @endpoint
    def release(self) -> None:
        _gate.set()


class Traced(Actor):
    """Installs an in-memory OpenTelemetry tracer provider in its proc and reports spans."""

    def __init__(self) -> None:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        trace.set_tracer_provider(provider)

    @endpoint
    def work(self, n: int) -> int:
        from monarch.actor import span

        with span("inner", {"n": n}):
            return n + 1

    @endpoint
    def spans(self) -> list[dict[str, Any]]:
        return [{"name": s.name, "attributes": dict(s.attributes or {}),
                 "parent": None if s.parent is None else s.parent.span_id,
                 "id": s.context.span_id}
                for s in self.exporter.get_finished_spans()]


class Crashing(Actor):
    """`crash` fails the actor (a BaseException): its owner, the client, is told."""

    @endpoint
    def crash(self) -> None:
        raise SystemExit("crashed on purpose")

    @endpoint
    def ping(self) -> str:
        return "pong"
