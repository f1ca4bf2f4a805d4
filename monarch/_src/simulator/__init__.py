"""The simulator: time and memory of a tensor program, predicted without running it.

Modules, from the bottom up:

* `profiles.py`: device profiles (peak FLOP/s per dtype, memory bandwidth, per-op overheads):
  built-in H100 and H200, and a CPU profile calibrated by a short micro-benchmark.
* `calibrate.py`: the micro-benchmarks: in-process, in concurrent child processes (several
  CPU workers sharing the machine), or through a real tensor engine (`engine_profile`).
* `costs.py`: FLOP and byte counts of one command from its `OpMeta`, and which outputs alias
  (are views of) which inputs, from the operator's schema.
* `network.py`: the latency-bandwidth model of collectives and point-to-point transfers.
* `model.py`: the execution model (per-worker streams, dependencies, collectives that finish
  when every participant arrived, borrows) and the memory model (per-storage accounting).
* `session.py`: the controller's simulated clock, batches, fetches and iteration marks.
* `trace.py`: Chrome trace-event JSON, the memory timeline, and an offline HTML/SVG view.
* `history.py`: recording the command stream of a real engine to a file, and reading it back.
* `ir.py`: the IR graph (control DAG of commands, data DAG of tensor events), torchmonarch's
  `monarch.simulator.ir`; `ir_build.py` fills one from a session's history, `ir_export.py`
  writes its exports (timing keys, estimated timing, DAG trace, tables, memory snapshot).
* `profiling.py`: one operator's time by name and input shapes, measured on a GPU or estimated
  from a device profile.
* `task.py`: torchmonarch's event-driven task states and per-worker task manager (a vocabulary
  for simulations run one event at a time; `model.py` needs none of it).
* `backend.py`: the simulated engine behind a `DeviceMesh` (the tensor engine's backend seam).
* `interface.py`: `Simulator`, `SimulatorInterface`, the mode enums and `set_meta`.
"""
