"""`Simulator`, `SimulatorInterface`, the mode enums, `set_meta` and standalone replay."""

from __future__ import annotations

import contextlib
import enum
import json
import os
from collections.abc import Iterator
from typing import Any

from monarch._src.simulator import history as history_mod, trace as trace_mod
from monarch._src.simulator.backend import SimEngine, pop_tag, push_tag
from monarch._src.simulator.ir import IRGraph
from monarch._src.simulator.ir_build import build_ir
from monarch._src.simulator.network import CommModel
from monarch._src.simulator.profiles import DeviceProfile, cpu_profile, get_profile
from monarch._src.simulator.session import Iteration, Session

__all__ = [
    "SimulateMode",
    "SimulationResult",
    "Simulator",
    "SimulatorInterface",
    "TraceMode",
    "default_comm",
    "replay",
    "set_meta",
]


class SimulateMode(enum.Enum):
    """What a simulator does: simulate and write the trace (`SIMULATE`), simulate and only
    report (`SIMULATE_WITH_REPORT_ONLY`), only record the command history
    (`COMMAND_HISTORY`), or all of it (`EVERYTHING`)."""

    SIMULATE = "simulate"
    SIMULATE_WITH_REPORT_ONLY = "simulate_with_report_only"
    COMMAND_HISTORY = "command_history"
    EVERYTHING = "everything"


class TraceMode(enum.Enum):
    """What the trace shows: the controller only, worker streams only, or both."""

    CONTROLLER_TRACE_ONLY = "controller_trace_only"
    STREAM_ONLY = "stream_only"
    EVERYTHING = "everything"


def _mode(enum_type: Any, value: Any, what: str) -> Any:
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        key = value.strip().lower()
        for member in enum_type:
            if member.value == key or member.name.lower() == key:
                return member
    raise ValueError(
        f"Unknown {what} {value!r}; use one of "
        f"{[m.name for m in enum_type]} (strings, any case, or {enum_type.__name__} members)."
    )


@contextlib.contextmanager
def set_meta(value: Any) -> Iterator[None]:
    """Tag every command issued inside the block with `value` (shown in the trace and kept in
    each simulated task's `tag`). Nested blocks tag with the innermost value."""
    push_tag(value)
    try:
        yield
    finally:
        pop_tag()


def _show_html(html: str) -> None:
    """Show `html` inline when IPython is there (its display functions are unannotated)."""
    try:
        from IPython.display import HTML, display

        display(HTML(html))  # type: ignore[no-untyped-call]
    except ImportError:
        pass  # not in IPython: the caller printed the text form already


class SimulationResult:
    """The outcome of a simulation: times, peaks, iterations, trace and memory timeline."""

    def __init__(self, session: Session, trace_mode: TraceMode = TraceMode.EVERYTHING,
                 group_workers: bool = False) -> None:
        self.session = session
        self._trace_mode = trace_mode
        self._group = group_workers

    @property
    def iterations(self) -> list[Iteration]:
        """Iterations marked with `step()`."""
        return list(self.session.iterations)

    def iteration_report(self) -> list[tuple[float, float]]:
        """Per iteration: (simulated seconds, peak memory MB on the busiest worker)."""
        return [(it.time, it.peak_memory_mb) for it in self.session.iterations]

    def total_time(self) -> float:
        """Simulated seconds until the controller and every worker are done."""
        return self.session.total_time()

    def peak_memory(self) -> dict[int, int]:
        """Rank -> peak bytes."""
        return self.session.peak_bytes()

    def stream_peak_memory(self) -> dict[int, dict[str, int]]:
        """Rank -> stream -> peak bytes of the storages that stream created."""
        return self.session.stream_peak_bytes()

    def tasks(self, rank: int = 0) -> list[Any]:
        """The simulated tasks of worker `rank`, in order."""
        self.session.drain()
        return list(self.session.model.workers[rank].tasks)

    def memory_timeline(self) -> list[dict[str, Any]]:
        """Every allocation and free (see `trace.memory_timeline`)."""
        return trace_mod.memory_timeline(self.session)

    def memory_snapshot(self, path: str | None = None) -> dict[str, Any]:
        """The memory timeline as a `torch.cuda.memory._snapshot()`-style dict (one device
        per worker); with `path`, also pickled there for `torch.cuda._memory_viz`."""
        snapshot = trace_mod.memory_snapshot(self.session)
        if path is not None:
            import pickle

            with open(path, "wb") as f:
                pickle.dump(snapshot, f)
        return snapshot

    def trace(self) -> dict[str, Any]:
        """The Chrome trace-event dict (Perfetto loads its JSON)."""
        return trace_mod.chrome_trace(self.session, self._trace_mode.value, self._group)

    def write_trace(self, path: str) -> str:
        """Write the Chrome trace JSON to `path`; returns the path."""
        with open(path, "w") as f:
            json.dump(self.trace(), f)
        return path

    def worker_groups(self) -> list[list[int]]:
        """Ranks grouped by identical simulated behaviour."""
        self.session.drain()
        return trace_mod.group_workers(self.session.model.workers)

    def report(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "total_time_s": self.total_time(),
            "peak_memory_bytes": self.peak_memory(),
            "iterations": [{"time_s": t, "peak_memory_mb": m}
                           for t, m in self.iteration_report()],
            "profile": self.session.profile.name,
        }

    def _repr_html_(self) -> str:
        return trace_mod.timeline_html(self.session, grouped=True)

    def display(self) -> Any:
        """Show the timeline in a notebook (inline HTML/SVG; works offline)."""
        html = self._repr_html_()
        _show_html(html)
        return html


class SimulatorInterface(SimulationResult):
    """A simulated mesh (`.mesh`, dims "host" and "gpu") and the results of simulating it."""

    def __init__(self, hosts: int, gpus: int, simulate_mode: SimulateMode,
                 trace_mode: TraceMode, trace_path: str, command_history_path: str,
                 group_workers: bool, build_ir: bool, profile: DeviceProfile,
                 comm: CommModel, host_profile: DeviceProfile | None = None) -> None:
        self.simulate_mode = simulate_mode
        self.trace_path = trace_path
        self.command_history_path = command_history_path
        self.build_ir = build_ir
        self.hosts, self.gpus = hosts, gpus
        session = Session(hosts * gpus, profile, comm,
                          simulate=simulate_mode is not SimulateMode.COMMAND_HISTORY,
                          host_profile=host_profile)
        super().__init__(session, trace_mode, group_workers)
        self._engine = SimEngine(session, ("host", "gpu"), (hosts, gpus))
        self._engine.on_exit.append(self._finish)
        self.finished = False

    @property
    def mesh(self) -> Any:
        """The simulated `DeviceMesh`: use it like a real one (`with sim.mesh.activate():`)."""
        return self._engine.root_mesh

    def step(self) -> Iteration:
        """End the current iteration; returns it (simulated seconds and peak memory)."""
        self._engine.flush()
        return self.session.step()

    def _finish(self) -> None:
        self.session.drain()
        mode = self.simulate_mode
        if mode in (SimulateMode.SIMULATE, SimulateMode.EVERYTHING) and self.trace_path:
            self.write_trace(self.trace_path)
        if mode in (SimulateMode.COMMAND_HISTORY, SimulateMode.EVERYTHING) \
                and self.command_history_path:
            history_mod.save(self.command_history_path, ("host", "gpu"),
                             (self.hosts, self.gpus), self.session.history)
        self.finished = True

    @property
    def ir(self) -> IRGraph:
        """The IR graph (`monarch.simulator.ir.IRGraph`) of everything issued so far: the
        control DAG of commands per worker and the data DAG of tensor events; needs
        `build_ir=True`."""
        if not self.build_ir:
            raise ValueError(
                "The simulator IR is built only when asked for: create the simulator with "
                "Simulator(..., build_ir=True)."
            )
        self._engine.flush()
        return build_ir(self.session.history, self.hosts * self.gpus)

    def export_ir(self, path: str) -> str:
        """Save the IR graph (`ir`) with `torch.save` (load it with
        `torch.load(path, weights_only=False)`); needs `build_ir=True`."""
        if not self.build_ir:
            raise ValueError(
                "export_ir() needs the IR: create the simulator with Simulator(..., "
                "build_ir=True)."
            )
        import torch

        graph = self.ir
        with open(path, "wb") as f:
            torch.save(graph, f)
        return path

    def upload(self) -> None:
        """Not available: uploading traces targets Meta-internal services."""
        raise NotImplementedError(
            "upload() sends traces to a Meta-internal service; open the trace file "
            f"{self.trace_path!r} in https://ui.perfetto.dev instead."
        )


def Simulator(hosts: int, gpus: int, *, simulate_mode: Any = "simulate",
              trace_mode: Any = "stream_only", upload_trace: bool = False,
              trace_path: str = "trace.json",
              command_history_path: str = "command_history.pkl",
              group_workers: bool = False, build_ir: bool = False,
              profile: str | DeviceProfile = "H100",
              comm: CommModel | None = None,
              cpu_tensors: str = "device") -> SimulatorInterface:
    """A simulated mesh of `hosts` x `gpus` workers: run tensor code against `.mesh` and get
    predicted time and memory instead of results (see docs/simulator.md).

    `profile` is a device profile ("H100", "H200", "cpu" or a `DeviceProfile`); `comm` the
    collective model (default: intra-node 900 GB/s, inter-node 50 GB/s, 2 us per hop, `gpus`
    per node, contention 0.5; for the "cpu" profile, loopback figures from this machine).
    `cpu_tensors` says how a GPU profile costs operators on CPU tensors: "device" (as GPU
    work: the default, since fake CUDA tensors need a CUDA build on the controller) or "host"
    (at this machine's measured CPU rates, on the worker's host thread).
    """
    for name, value in (("hosts", hosts), ("gpus", gpus)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"Simulator {name} must be a positive int, got {value!r}.")
    if upload_trace:
        raise NotImplementedError(
            "Simulator(upload_trace=True) targets a Meta-internal service; open trace_path in "
            "https://ui.perfetto.dev instead."
        )
    if cpu_tensors not in ("device", "host"):
        raise ValueError(
            f"Simulator cpu_tensors must be 'device' or 'host', got {cpu_tensors!r}."
        )
    sim_mode = _mode(SimulateMode, simulate_mode, "simulate_mode")
    tr_mode = _mode(TraceMode, trace_mode, "trace_mode")
    if isinstance(profile, str) and profile.lower() == "cpu":
        prof = cpu_profile(workers=min(hosts * gpus, 8))
    else:
        prof = get_profile(profile)
    if comm is None:
        comm = default_comm(prof, gpus)
    host = cpu_profile() if cpu_tensors == "host" and prof.kind == "gpu" else None
    return SimulatorInterface(hosts, gpus, sim_mode, tr_mode, os.fspath(trace_path),
                              os.fspath(command_history_path), group_workers, build_ir, prof,
                              comm, host)


def default_comm(profile: DeviceProfile, gpus_per_node: int) -> CommModel:
    """The collective model that goes with `profile`: the contract's defaults for GPUs; for a
    CPU profile, its measured gloo figures (or loopback guesses: a quarter of the memory
    bandwidth, 50 us per step)."""
    if profile.kind == "cpu":
        bw = profile.collective_bandwidth or profile.memory_bandwidth / 4
        latency = profile.collective_latency
        return CommModel(intra_node_bandwidth=bw, inter_node_bandwidth=bw,
                         hop_latency=50e-6 if latency is None else latency,
                         gpus_per_node=max(gpus_per_node, 1))
    return CommModel(gpus_per_node=max(gpus_per_node, 1))


def replay(path: str, *, profile: str | DeviceProfile = "cpu", comm: CommModel | None = None,
           trace_mode: Any = "everything", group_workers: bool = False) -> SimulationResult:
    """Simulate a recorded command history file standalone (no mesh, no procs)."""
    data = history_mod.load(path)
    world = 1
    for size in data["sizes"]:
        world *= size
    if isinstance(profile, str) and profile.lower() == "cpu":
        prof = cpu_profile(workers=min(world, 8))
    else:
        prof = get_profile(profile)
    if comm is None:
        gpus = data["sizes"][-1] if data["sizes"] else 1
        comm = default_comm(prof, gpus)
    session = history_mod.replay(data, prof, comm)
    return SimulationResult(session, _mode(TraceMode, trace_mode, "trace_mode"), group_workers)


