"""A simulation session: the controller's clock, the command batches, fetches and iterations.

The session turns what the controller does into simulated time. The controller's own time is
its real elapsed time (the same user code and the same dispatch run as against real workers),
minus the time the simulator itself spends, plus what a real controller would add: serialising
and posting each batch, and waiting for fetched values. Batches reach the workers one message
latency after they are posted. Both a live simulated mesh (`backend.py`) and a replay of a
recorded history (`history.py`) drive a session.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable
from typing import Any

from monarch._src.simulator.model import SimulationModel
from monarch._src.simulator.network import CommModel
from monarch._src.simulator.profiles import DeviceProfile

__all__ = ["ControllerEvent", "Iteration", "Session"]


@dataclasses.dataclass
class ControllerEvent:
    """Something the controller did, in simulated seconds."""

    name: str
    start: float
    end: float
    args: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Iteration:
    """One iteration between two `step()` marks: simulated seconds and peak bytes."""

    index: int
    start: float
    end: float
    peak_bytes: int

    @property
    def time(self) -> float:
        """Simulated seconds of the iteration."""
        return self.end - self.start

    @property
    def peak_memory_mb(self) -> float:
        """Peak memory of the iteration on the busiest worker, in MB (10**6 bytes)."""
        return self.peak_bytes / 1e6


class Session:
    """Simulated time of one controller and its workers (thread-safe)."""

    def __init__(self, world: int, profile: DeviceProfile, comm: CommModel,
                 simulate: bool = True, host_profile: DeviceProfile | None = None) -> None:
        self.model = SimulationModel(world, profile, comm, host_profile)
        self.profile = profile
        self.simulate = simulate
        self.controller: list[ControllerEvent] = []
        self.iterations: list[Iteration] = []
        self.history: list[tuple[str, float, Any]] = []  # ("batch"|"fetch"|"step", time, data)
        self._lock = threading.RLock()
        self._pending: list[tuple[float, list[Any], Any]] = []
        self._t0: float | None = None  # real time of the first batch: simulated time 0
        self._excluded = 0.0  # real seconds spent inside the simulator
        self._added = 0.0  # simulated seconds the real controller would have spent more
        self._last_mark = 0.0
        # The controller's thread (the one that built the session): only its time inside the
        # simulator is excluded; deferred flushes run on the runtime loop thread.
        self._controller_thread = threading.get_ident()

    # ---- the controller's clock ----------------------------------------------------------
    def now(self) -> float:
        """The controller's simulated time (0 when the first batch was posted)."""
        if self._t0 is None:
            self._t0 = time.perf_counter()
        return time.perf_counter() - self._t0 - self._excluded + self._added

    def _advance_to(self, when: float) -> None:
        lag = when - self.now()
        if lag > 0:
            self._added += lag

    # ---- inputs --------------------------------------------------------------------------
    def post_batch(self, commands: list[Any], tag: Any = None, at: float | None = None) -> None:
        """The controller posts one batch (at `at`, default now); cheap, processed lazily."""
        entered = time.perf_counter()
        with self._lock:
            t = self.now() if at is None else at
            p = self.profile
            cost = p.batch_overhead + p.command_overhead * len(commands)
            if at is None:
                self._added += cost
            self.controller.append(ControllerEvent("send batch", t, t + cost,
                                                   {"commands": len(commands)}))
            self.history.append(("batch", t, (list(commands), tag)))
            self._pending.append((t + cost + p.message_latency, list(commands), tag))
            if at is None and threading.get_ident() == self._controller_thread:
                self._excluded += time.perf_counter() - entered

    def drain(self) -> None:
        """Advance the model through every batch posted so far."""
        entered = time.perf_counter()
        with self._lock:
            pending, self._pending = self._pending, []
            if self.simulate:
                for arrival, commands, tag in pending:
                    self.model.run_batch(commands, arrival, tag)
            self._excluded += time.perf_counter() - entered

    def fetch(self, rank: int, ids: Iterable[int], at: float | None = None) -> float:
        """The controller waits for values `ids` of `rank`; returns when they arrive."""
        ids = list(ids)
        self.drain()
        entered = time.perf_counter()
        with self._lock:
            t = self.now() if at is None else at
            self.history.append(("fetch", t, (rank, ids)))
            done = self.model.fetch(rank, ids, t) if self.simulate else t
            self.controller.append(ControllerEvent("fetch", t, done, {"rank": rank}))
            if at is None:
                self._excluded += time.perf_counter() - entered
                self._advance_to(done)
            return done

    def step(self, at: float | None = None) -> Iteration:
        """Mark the end of an iteration: it ends when the controller reached this point and
        every worker finished what was issued before it."""
        self.drain()
        with self._lock:
            t = self.now() if at is None else at
            self.history.append(("step", t, None))
            end = max(t, self.model.finished()) if self.simulate else t
            it = Iteration(len(self.iterations), self._last_mark, end, self.model.reset_window())
            self.iterations.append(it)
            self._last_mark = end
            self.controller.append(ControllerEvent(f"iteration {it.index}", it.start, it.end))
            return it

    # ---- results -------------------------------------------------------------------------
    def total_time(self) -> float:
        """Simulated seconds until the controller and every worker are done."""
        self.drain()
        return max(self.model.finished(), self._last_mark)

    def peak_bytes(self) -> dict[int, int]:
        """Rank -> peak bytes over the whole run."""
        self.drain()
        return {w.rank: w.peak for w in self.model.workers}

    def stream_peak_bytes(self) -> dict[int, dict[str, int]]:
        """Rank -> stream -> peak bytes charged to that stream."""
        self.drain()
        return {w.rank: dict(w.stream_peak) for w in self.model.workers}
