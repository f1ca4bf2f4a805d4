"""Exports of an `IRGraph` (`ir.py`): timing keys and the command-type catalogue, imported
timing, the Chrome trace of the control DAG, tab-separated tables, a memory snapshot.

A timing key names what a command's duration depends on, fields separated by colons, empty
fields left out: "CallFunction:{op}:{input shapes}:{dtype}", "Reduce:{kind}:{shape}:{dtype}:
{devices}", "SendTensor:{shape}:{dtype}", and the bare kind for anything else (borrows).
Shapes read "(3x4)x(4x5)" (the inputs of the command, or its outputs when it read none); an
unknown dtype reads "unknown".

Estimated durations (`include_timing`): collectives and sends from the communication model
(`monarch.simulator.communication_model`, under the given `NetworkConfig`), operators measured
on the GPU when there is one (`profiling.profile_function`) and otherwise from the H100 device
profile (`profiling.estimate_function_us`), anything else 100 µs.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import pickle
import traceback as tb_mod
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from monarch._src.simulator.ir import (
    Command,
    IRGraph,
    StorageCreationEvent,
    StorageDeletionEvent,
    TensorAccessEvent,
    TensorCreationEvent,
    TensorDeletionEvent,
)

if TYPE_CHECKING:
    from monarch._src.simulator.communication import NetworkConfig

__all__ = [
    "export_command_types",
    "export_dag_json",
    "export_memory_viz",
    "export_table",
    "import_timing",
    "timing_keys",
]

logger = logging.getLogger(__name__)

ShapeList = list[tuple[tuple[int, ...], Any]]  # (dims, dtype) per tensor
_FALLBACK_OP_US = 10_000  # an operator whose time cannot be estimated
_OTHER_US = 100  # borrows and other bookkeeping commands
_WIDTH_US = 4000  # the untimed trace draws every command this wide...
_GAP_US = 1000  # ...with this gap after it


def _command_shapes(ir: IRGraph) -> dict[int, ShapeList]:
    """Command id -> the (dims, dtype) of the tensors it reads, or of those it creates when it
    reads none (an in-place collective reads nothing new)."""
    created: set[tuple[int, int]] = set()
    outputs: defaultdict[int, ShapeList] = defaultdict(list)
    for e in ir.data_dag:
        if type(e) is TensorCreationEvent:
            created.add((e.command_id, e.DTensorRef))
            if e.dims is not None:
                outputs[e.command_id].append((tuple(e.dims), e.dtype))
    inputs: defaultdict[int, ShapeList] = defaultdict(list)
    for e in ir.data_dag:
        if type(e) is TensorAccessEvent and e.dims is not None \
                and (e.command_id, e.DTensorRef) not in created:
            inputs[e.command_id].append((tuple(e.dims), e.dtype))
    return {cid: inputs.get(cid) or outputs[cid] for cid in {*inputs, *outputs}}


def _split_name(name: str) -> tuple[str, str]:
    parts = [p.strip() for p in name.split(":")]
    return parts[0], (parts[1] if len(parts) > 1 and parts[1] else "unknown")


def _dtype_name(shapes: ShapeList) -> str:
    if shapes and shapes[0][1] is not None:
        return str(shapes[0][1]).replace("torch.", "")
    return "unknown"


def _shape_text(shapes: ShapeList) -> str:
    return "x".join("(" + "x".join(str(d) for d in dims) + ")" for dims, _ in shapes)


def timing_key(cmd: Command, shapes: dict[int, ShapeList]) -> str:
    """The timing key of `cmd` (module docstring), given `_command_shapes`."""
    kind, sub = _split_name(cmd.command_name)
    found = shapes.get(cmd.command_id, [])
    text, dtype = _shape_text(found), _dtype_name(found)
    if kind == "CallFunction":
        fields = [kind, sub, text, dtype]
    elif kind == "Reduce":
        fields = [kind, sub, text, dtype, str(len(cmd.devices))]
    elif kind == "SendTensor":
        fields = [kind, text, dtype]
    else:
        fields = [kind]
    return ":".join(f for f in fields if f)


def timing_keys(ir: IRGraph) -> list[str]:
    """The timing key of every command of the control DAG, in order."""
    shapes = _command_shapes(ir)
    return [timing_key(c, shapes) for c in ir.control_dag]


def _catalogue(ir: IRGraph) -> dict[str, dict[str, Any]]:
    shapes = _command_shapes(ir)
    entries: dict[str, dict[str, Any]] = {}
    for cmd in ir.control_dag:
        key = timing_key(cmd, shapes)
        entry = entries.get(key)
        if entry is None:
            kind, sub = _split_name(cmd.command_name)
            entry = entries[key] = {"timing_key": key, "count": 0}
            found = shapes.get(cmd.command_id, [])
            if found and not kind.startswith("Borrow"):
                if kind == "CallFunction":
                    entry["input_shapes"] = [list(dims) for dims, _ in found]
                    if sub != "unknown":
                        from monarch._src.simulator.profiling import expand_func_path

                        entry["func_path"] = expand_func_path(sub)
                else:
                    entry["tensor_shape"] = list(found[0][0])
                entry["dtype"] = _dtype_name(found)
            if kind == "Reduce":
                entry["num_devices"] = len(cmd.devices)
        entry["count"] += 1
    return entries


def _op_time_us(key: str, entry: dict[str, Any]) -> int:
    import torch

    from monarch._src.simulator import profiling

    op = key.split(":")[1] if key.count(":") else ""
    dtype = getattr(torch, entry.get("dtype", "float32"), torch.float32)
    shapes = [(tuple(s), dtype) for s in entry.get("input_shapes", [])]
    if not (op and shapes):
        return _FALLBACK_OP_US
    try:
        if torch.cuda.is_available():
            return profiling.profile_function(op, shapes)
        return profiling.estimate_function_us(op, shapes)
    except Exception as exc:  # an operator these inputs do not fit: say so, keep going
        logger.warning("monarch: no time for %s (%s: %s); using %d us", key,
                       type(exc).__name__, exc, _FALLBACK_OP_US)
        return _FALLBACK_OP_US


def export_command_types(ir: IRGraph, output_file: str, include_timing: bool = False,
                         network_config: NetworkConfig | None = None) -> None:
    """`IRGraph.export_command_types`."""
    entries = _catalogue(ir)
    output: dict[str, Any] = {"command_types": list(entries.values())}
    if include_timing:
        from monarch._src.simulator.communication import (
            NetworkConfig,
            estimate_collective_time_us,
            estimate_send_time_us,
        )

        config = network_config if network_config is not None else NetworkConfig()
        timing: dict[str, int] = {}
        for key, entry in entries.items():
            kind = key.split(":")[0]
            if kind == "CallFunction":
                us = _op_time_us(key, entry)
            elif kind == "Reduce":
                us = estimate_collective_time_us(
                    key.split(":")[1], entry.get("tensor_shape", []),
                    entry.get("dtype", "float32"), entry.get("num_devices", 1), config)
            elif kind == "SendTensor":
                us = estimate_send_time_us(entry.get("tensor_shape", []),
                                           entry.get("dtype", "float32"), config)
            else:
                us = _OTHER_US
            timing[key] = entry["timing_us"] = us
        output["timing"] = timing
    with open(output_file, "w") as f:
        json.dump(output, f, indent=2)
    if include_timing:
        import_timing(ir, output["timing"])


def import_timing(ir: IRGraph, timing: str | dict[str, int]) -> None:
    """`IRGraph.import_timing`."""
    if isinstance(timing, str):
        with open(timing) as f:
            timing = json.load(f)
    if not isinstance(timing, dict):
        raise ValueError(
            "IRGraph.import_timing takes a mapping of timing key -> microseconds (or a JSON "
            f"file holding one); got {type(timing).__name__}."
        )
    keys = timing_keys(ir)
    ir.control_dag = [c._replace(duration=int(timing[k])) if k in timing else c
                      for c, k in zip(ir.control_dag, keys, strict=True)]


def export_dag_json(ir: IRGraph, output_file: str, timed: bool) -> None:
    """The control DAG as Chrome trace events: a process per worker, a thread per stream.
    Commands of one stream follow one another; the runs of one collective or send (same name)
    start together, at the latest of their streams' positions; a borrow draws an arrow from its
    creation to its drop."""
    keys = timing_keys(ir) if timed else [""] * len(ir.control_dag)
    position: defaultdict[tuple[int, str], int] = defaultdict(int)  # (worker, stream) -> free
    group_start: dict[str, int] = {}
    groups: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    untimed: set[str] = set()
    events: list[dict[str, Any]] = []
    for cmd, key in zip(ir.control_dag, keys, strict=True):
        width = _WIDTH_US
        if timed:
            width = cmd.duration
            if width <= 0:
                untimed.add(key)
                width = 1
        kind = cmd.command_name.split(":")[0].strip()
        here = (cmd.worker_rank, cmd.stream_name)
        event: dict[str, Any] = {
            "name": cmd.command_name, "cat": kind, "ph": "X", "pid": cmd.worker_rank,
            "tid": cmd.stream_name, "dur": width,
            "args": {"command_id": cmd.command_id, "command_type": kind,
                     "devices": cmd.devices, "control dependencies": cmd.control_dependencies,
                     "traceback": tb_mod.format_list(list(cmd.traceback))},
        }
        start = position[here]
        if kind in ("Reduce", "SendTensor"):
            start = max(start, group_start.get(cmd.command_name, 0))
            if start > group_start.get(cmd.command_name, -1):
                group_start[cmd.command_name] = start
                for other in groups[cmd.command_name]:  # the earlier runs wait for this one
                    other["ts"] = start
                    position[(other["pid"], other["tid"])] = start + other["dur"] + _GAP_US
            groups[cmd.command_name].append(event)
            if kind == "SendTensor":
                half = len(cmd.devices) // 2
                event["args"]["send devices"] = cmd.devices[:half]
                event["args"]["recv devices"] = cmd.devices[half:]
        event["ts"] = start
        position[here] = start + width + _GAP_US
        events.append(event)
        if kind in ("BorrowCreate", "BorrowDrop"):
            borrow = cmd.command_name.split(":")[-1].strip()
            events.append({"name": f"borrow {borrow}", "cat": "borrow", "id":
                           f"{cmd.worker_rank}:{borrow}", "pid": cmd.worker_rank,
                           "tid": cmd.stream_name, "ts": start,
                           "ph": "s" if kind == "BorrowCreate" else "f", "bp": "e"})
    if untimed:
        print(f"Warning: {len(untimed)} command type(s) have no timing data:")
        for key in sorted(untimed):
            print(f"  {key}")
    with open(output_file, "w") as f:
        json.dump({"traceEvents": events}, f)


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list, set)):
        return str(sorted(value)) if value else "None"
    return str(value)


def export_table(rows: dict[Any, Any], filename: str, what: str) -> None:
    """Write `rows` (dataclass records, or data event tuples) as an aligned tab-separated
    table; prints a line instead when there are none."""
    if not rows:
        print(f"No {what} information to export.")
        return
    first = next(iter(rows.values()))
    if dataclasses.is_dataclass(first):
        columns = [f.name for f in dataclasses.fields(first)]

        def get(row: Any, col: str) -> Any:
            return getattr(row, col)
    elif isinstance(first, tuple):
        columns = ["DataEvent", "command_id", "storage_id", "DTensorRef", "mesh_ref",
                   "stream_name", "dims", "dtype", "size"]

        def get(row: Any, col: str) -> Any:
            if col == "DataEvent":
                return type(row).__name__.removesuffix("Event")
            return getattr(row, col, "")
    else:
        raise ValueError(
            f"Cannot export {what} rows of type {type(first).__name__}: expected dataclass "
            "records or data events."
        )
    table = [[_cell(get(row, c)) for c in columns] for row in rows.values()]
    widths = [max(len(c), *(len(r[i]) for r in table)) for i, c in enumerate(columns)]
    with open(filename, "w", newline="") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow([c.ljust(w) for c, w in zip(columns, widths, strict=True)])
        for r in table:
            writer.writerow([v.ljust(w) for v, w in zip(r, widths, strict=True)])


def export_memory_viz(ir: IRGraph, filename: str) -> None:
    """Per device, the storages created and freed, in order, as a pickled
    `torch.cuda.memory._snapshot()`-style dict (`device_traces`; addresses are storage ids);
    prints each device's peak."""
    frames_of = {c.command_id: c.traceback for c in ir.control_dag}
    deleted_by = {e.command_id: e.traceback for e in ir.data_dag
                  if type(e) is TensorDeletionEvent}
    per_device: defaultdict[int, list[dict[str, Any]]] = defaultdict(list)
    live: defaultdict[int, int] = defaultdict(int)
    peak: defaultdict[int, int] = defaultdict(int)
    for e in ir.data_dag:
        if type(e) not in (StorageCreationEvent, StorageDeletionEvent):
            continue
        size = e.size or 0
        alloc = type(e) is StorageCreationEvent
        frames = (frames_of if alloc else deleted_by).get(e.command_id, ())
        for device in e.devices:
            live[device] += size if alloc else -size
            peak[device] = max(peak[device], live[device])
            per_device[device].append({
                "action": "alloc" if alloc else "free_completed", "addr": e.storage_id,
                "size": size, "stream": 0,
                "frames": [{"filename": fr.filename, "line": fr.lineno, "name": fr.name}
                           for fr in frames],
            })
    devices = sorted(per_device)
    for device in devices:
        print(f"Device {device} max mem: {peak[device]} B")
    snapshot = {"segments": [], "device_traces": [per_device[d] for d in devices]}
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)
