"""The simulator: predicted time and memory of a tensor program, without running it.

`Simulator(hosts, gpus, ...)` returns a `SimulatorInterface` whose `.mesh` is a tensor-engine
`DeviceMesh` backed by a simulation instead of workers. See docs/simulator.md.

`H100` and `H200` are the built-in `DeviceProfile`s (peak FLOP/s per dtype, memory bandwidth,
launch overhead); `cpu_profile()` and `engine_profile(procs)` calibrate one on this machine.
"""

from monarch._src.simulator.calibrate import engine_profile, threads_per_worker
from monarch._src.simulator.history import load as load_history, record
from monarch._src.simulator.interface import (
    SimulateMode,
    SimulationResult,
    Simulator,
    SimulatorInterface,
    TraceMode,
    default_comm,
    replay,
    set_meta,
)
from monarch._src.simulator.network import CommModel
from monarch._src.simulator.profiles import H100, H200, DeviceProfile, cpu_profile, get_profile

__all__ = [
    "H100",
    "H200",
    "CommModel",
    "DeviceProfile",
    "SimulateMode",
    "SimulationResult",
    "Simulator",
    "SimulatorInterface",
    "TraceMode",
    "cpu_profile",
    "default_comm",
    "engine_profile",
    "get_profile",
    "load_history",
    "record",
    "replay",
    "set_meta",
    "threads_per_worker",
]
