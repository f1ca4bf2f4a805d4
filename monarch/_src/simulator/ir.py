"""The IR of a simulated program: a control DAG of commands and a data DAG of tensor events.

torchmonarch's `monarch.simulator.ir` names. `IRGraph.control_dag` holds one `Command` per
(worker, command): its stream, a name such as "CallFunction: aten.mm", "Reduce: all_reduce: 7",
"SendTensor: 7" or "BorrowCreate: 3", the devices taking part, and the command ids it waits for.
`IRGraph.data_dag` holds the life of each tensor and storage as events (creation, access,
mutation, deletion), per command, with the workers where it happened. `ir_build.py` fills a
graph from a simulator session's command history; tests and tools may also fill one directly
(`insert_node`, `update_tensor`, `delete_tensor`, `add_borrow`, `add_sendtensor`).

Exports (`ir_export.py`): the catalogue of command types keyed by a *timing key*
(`export_command_types`: "CallFunction:aten.mm:(3x4)x(4x5):float32",
"Reduce:reduce_scatter:(1024x1024):float32:8", "SendTensor:(512x512):float32", "BorrowCreate")
with optional estimated durations, timing imported back onto the commands (`import_timing`), a
Chrome trace of the DAG (`export_dag_json`, `export_dag_json_timed`), tab-separated tables of
borrows, sends and tensors, and a memory snapshot per device (`export_memory_viz`).
"""

from __future__ import annotations

import dataclasses
import itertools
import traceback
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from monarch._src.simulator.communication import NetworkConfig

__all__ = [
    "BorrowInfo",
    "Command",
    "DataEvent",
    "IRGraph",
    "SendTensorInfo",
    "StorageCreationEvent",
    "StorageDeletionEvent",
    "TensorAccessEvent",
    "TensorCreationEvent",
    "TensorDeletionEvent",
    "TensorInfo",
    "TensorMutationEvent",
]

Frames = Sequence[traceback.FrameSummary]


class Command(NamedTuple):
    """One command as run by one worker on one stream (a node of the control DAG)."""

    worker_rank: int
    stream_name: str
    command_id: int
    command_name: str  # "<kind>: <detail>", e.g. "CallFunction: aten.mm"
    devices: list[int]  # the workers taking part (a collective's group, a send's both ends)
    control_dependencies: list[int]  # command ids this one waits for
    traceback: Frames
    duration: int = 0  # microseconds, once timing is imported


class StorageCreationEvent(NamedTuple):
    command_id: int
    storage_id: int
    size: int | None  # bytes, when known
    devices: list[int]
    mesh_ref: int | None
    stream_name: str


class StorageDeletionEvent(NamedTuple):
    command_id: int
    storage_id: int
    size: int | None
    devices: list[int]
    mesh_ref: int | None
    stream_name: str


class TensorCreationEvent(NamedTuple):
    command_id: int
    DTensorRef: int  # torchmonarch's field name
    storage_id: int
    dtype: Any  # a torch.dtype (or its name), None when unknown
    dims: tuple[int, ...] | None
    devices: list[int]
    mesh_ref: int | None
    stream_name: str


class TensorAccessEvent(NamedTuple):
    command_id: int
    DTensorRef: int
    storage_id: int
    dtype: Any
    dims: tuple[int, ...] | None
    devices: list[int]
    mesh_ref: int | None
    stream_name: str


class TensorMutationEvent(NamedTuple):
    command_id: int
    DTensorRef: int
    storage_id: int
    dtype: Any
    dims: tuple[int, ...] | None
    devices: list[int]
    mesh_ref: int | None
    stream_name: str


class TensorDeletionEvent(NamedTuple):
    command_id: int
    DTensorRef: int
    storage_id: int
    dtype: Any
    dims: tuple[int, ...] | None
    devices: list[int]
    mesh_ref: int | None
    stream_name: str
    traceback: Frames


DataEvent = (StorageCreationEvent | StorageDeletionEvent | TensorCreationEvent
             | TensorAccessEvent | TensorMutationEvent | TensorDeletionEvent)
_TENSOR_EVENTS = (TensorCreationEvent, TensorAccessEvent, TensorMutationEvent,
                  TensorDeletionEvent)


@dataclasses.dataclass
class BorrowInfo:
    """One borrow: where it was made, first used, last used and dropped (command ids)."""

    borrow_id: int | None = None
    devices: set[int] = dataclasses.field(default_factory=set)
    src_stream_name: str | None = None
    dst_stream_name: str | None = None
    create_id: int | None = None
    firstuse_id: int | None = None
    lastuse_id: int | None = None
    drop_id: int | None = None


@dataclasses.dataclass
class SendTensorInfo:
    """One tensor sent between workers: from which devices and stream to which."""

    result_tensor_id: int | None = None
    src_devices: list[int] | None = None
    src_stream_name: str | None = None
    dst_devices: list[int] | None = None
    dst_stream_name: str | None = None
    result_tensor_dims: tuple[int, ...] | None = None


@dataclasses.dataclass
class TensorInfo:
    """Everything known of one storage: the tensors naming it and the commands touching it."""

    storage_id: int | None = None
    DTensorRefs: set[int] = dataclasses.field(default_factory=set)
    dtype: Any = None
    dims: tuple[int, ...] = ()
    size: int | None = None
    devices: set[int] = dataclasses.field(default_factory=set)
    mesh_ref: int | None = None
    stream_name: str | None = None
    storage_create_id: int | None = None
    tensor_create_ids: set[int] = dataclasses.field(default_factory=set)
    access_ids: set[int] = dataclasses.field(default_factory=set)
    mutation_ids: set[int] = dataclasses.field(default_factory=set)
    lastuse_id: int | None = None
    tensor_deletion_ids: set[int] = dataclasses.field(default_factory=set)
    storage_deletion_id: int | None = None


class _ControlInfo:
    """Borrows and sends, by borrow id and by the sent tensor's id."""

    def __init__(self) -> None:
        self.borrows_info: defaultdict[int, BorrowInfo] = defaultdict(BorrowInfo)
        self.sendtensor_info: defaultdict[int, SendTensorInfo] = defaultdict(SendTensorInfo)


class _DataInfo:
    """The bookkeeping behind the data DAG. A *storage key* is the caller's name for a piece of
    memory (tensors that are views of one another share it); storages get ids in creation
    order."""

    def __init__(self) -> None:
        self.data_dependency_info: defaultdict[int, TensorInfo] = defaultdict(TensorInfo)
        self.tensorref_to_stream: dict[int, str] = {}
        self.tensorref_to_storageid: dict[int, int] = {}
        self.tensorref_to_mesh_ref: dict[int, int | None] = {}
        self.storage_to_mesh_ref: dict[int, int | None] = {}
        self.id_to_storageid: dict[int, int] = {}  # storage key -> storage id
        self.storageid_to_tensorref: defaultdict[int, set[int]] = defaultdict(set)
        self.storageid_counter: Iterator[int] = itertools.count()


class IRGraph:
    """The control DAG (`control_dag`, a list of `Command`) and the data DAG (`data_dag`, a
    list of the `*Event` records) of a program, with their exports."""

    def __init__(self) -> None:
        self.control_dag: list[Command] = []
        self.data_dag: list[Any] = []  # DataEvent records, in command order
        self._control = _ControlInfo()
        self._data = _DataInfo()

    # ---- building ------------------------------------------------------------------------
    def insert_node(self, worker_rank: int, stream_name: str, command_id: int,
                    command_name: str, devices: list[int], control_dependencies: list[int],
                    traceback: Frames) -> None:
        """Add the run of command `command_id` by worker `worker_rank`."""
        self.control_dag.append(Command(worker_rank, stream_name, command_id, command_name,
                                        list(devices), list(control_dependencies),
                                        traceback))

    def add_borrow(self, borrow_id: int, device: int, src_stream_name: str,
                   dst_stream_name: str, create_id: int) -> None:
        """Record that worker `device` made borrow `borrow_id` at command `create_id`."""
        info = self._control.borrows_info[borrow_id]
        info.borrow_id = borrow_id
        info.devices.add(device)
        info.src_stream_name = src_stream_name
        info.dst_stream_name = dst_stream_name
        info.create_id = create_id

    def add_sendtensor(self, result_tensor_id: int, src_devices: list[int],
                       src_stream_name: str, dst_devices: list[int], dst_stream_name: str,
                       result_tensor_dims: tuple[int, ...]) -> None:
        """Record the send that produced tensor `result_tensor_id`."""
        info = self._control.sendtensor_info[result_tensor_id]
        info.result_tensor_id = result_tensor_id
        info.src_devices = list(src_devices)
        info.src_stream_name = src_stream_name
        info.dst_devices = list(dst_devices)
        info.dst_stream_name = dst_stream_name
        info.result_tensor_dims = tuple(result_tensor_dims)

    def update_tensor(self, temp_id: int, ref: int, dtype: Any, dims: tuple[int, ...],
                      worker_rank: int, stream_name: str, command_id: int,
                      mutate: bool = False, borrow_src_tensor_ref: int | None = None,
                      tensor_size: int | None = None, mesh_ref: int | None = None) -> None:
        """Command `command_id` on worker `worker_rank` touches tensor `ref`, whose memory the
        caller names `temp_id` (`mutate`: it writes it). A new `temp_id` is a new storage,
        unless `borrow_src_tensor_ref` says the tensor borrows that tensor's storage."""
        data = self._data
        new_storage = False
        if temp_id not in data.id_to_storageid:
            if borrow_src_tensor_ref is not None \
                    and borrow_src_tensor_ref in data.tensorref_to_storageid:
                storage_id = data.tensorref_to_storageid[borrow_src_tensor_ref]
            else:
                new_storage = True
                storage_id = next(data.storageid_counter)
                info = data.data_dependency_info[storage_id]
                info.storage_id = storage_id
                info.dtype, info.dims, info.size = dtype, tuple(dims), tensor_size
                info.stream_name = stream_name
                info.storage_create_id = command_id
            data.id_to_storageid[temp_id] = storage_id
        else:
            storage_id = data.id_to_storageid[temp_id]
        info = data.data_dependency_info[storage_id]
        storage_elsewhere = not new_storage and worker_rank not in info.devices
        info.devices.add(worker_rank)

        new_tensor = ref not in data.tensorref_to_stream
        if new_tensor:
            data.tensorref_to_storageid[ref] = storage_id
            data.tensorref_to_stream[ref] = stream_name
            data.storageid_to_tensorref[storage_id].add(ref)
            data.tensorref_to_mesh_ref[ref] = mesh_ref
            data.storage_to_mesh_ref.setdefault(storage_id, mesh_ref)
            info.DTensorRefs.add(ref)
            info.tensor_create_ids.add(command_id)
        info.access_ids.add(command_id)
        info.lastuse_id = command_id  # commands arrive in increasing id order
        if mutate:
            info.mutation_ids.add(command_id)

        tensor_fields = {"DTensorRef": ref, "dtype": dtype, "dims": tuple(dims)}
        if new_storage:
            self._add_event(StorageCreationEvent, command_id, storage_id, worker_rank,
                            stream_name, {"size": tensor_size})
        elif storage_elsewhere:  # the same storage, made on one more worker
            self._join_event(StorageCreationEvent, command_id, None, worker_rank)
        if new_tensor:
            self._add_event(TensorCreationEvent, command_id, storage_id, worker_rank,
                            stream_name, tensor_fields)
        else:
            self._join_event(TensorCreationEvent, command_id, ref, worker_rank)
        self._add_event(TensorAccessEvent, command_id, storage_id, worker_rank, stream_name,
                        tensor_fields)
        if mutate:
            self._add_event(TensorMutationEvent, command_id, storage_id, worker_rank,
                            stream_name, tensor_fields)

    def _join_event(self, kind: Any, command_id: int, ref: int | None, worker: int) -> bool:
        """Add `worker` to the devices of this command's `kind` event (of tensor `ref`, for
        tensor events); False when there is none."""
        for i in range(len(self.data_dag) - 1, -1, -1):
            event: Any = self.data_dag[i]
            if event.command_id != command_id:
                if event.command_id < command_id:
                    break  # events are in command order: nothing older can match
                continue
            if type(event) is kind and (ref is None or event.DTensorRef == ref):
                if worker not in event.devices:
                    self.data_dag[i] = event._replace(devices=[*event.devices, worker])
                return True
        return False

    def _add_event(self, kind: Any, command_id: int, storage_id: int, worker: int,
                   stream_name: str, fields: dict[str, Any]) -> None:
        ref = fields.get("DTensorRef")
        if not self._join_event(kind, command_id, ref, worker):
            self.data_dag.append(kind(command_id=command_id, storage_id=storage_id,
                                      devices=[worker], mesh_ref=None,
                                      stream_name=stream_name, **fields))

    def delete_tensor(self, ref: int, mesh_ranks: list[int], stream_name: str,
                      command_id: int, tb: Frames) -> None:
        """Tensor `ref` is deleted on `mesh_ranks` by command `command_id`; its storage goes
        with its last tensor."""
        data = self._data
        storage_id = data.tensorref_to_storageid.get(ref)
        if storage_id is None:
            raise KeyError(
                f"IRGraph.delete_tensor: tensor {ref} is not in the graph (never updated, or "
                "already deleted); call update_tensor for it first."
            )
        info = data.data_dependency_info[storage_id]
        info.tensor_deletion_ids.add(command_id)
        self.data_dag.append(TensorDeletionEvent(command_id, ref, storage_id, info.dtype,
                                                 info.dims, list(mesh_ranks), None,
                                                 stream_name, tb))
        del data.tensorref_to_storageid[ref]
        data.storageid_to_tensorref[storage_id].discard(ref)
        if not data.storageid_to_tensorref[storage_id]:
            self.data_dag.append(StorageDeletionEvent(command_id, storage_id, info.size,
                                                      list(mesh_ranks), None, stream_name))
            info.storage_deletion_id = command_id

    def convert_devices_to_meshes(self) -> None:
        """Stamp every data event, and every storage's info, with its mesh reference."""
        data = self._data

        def mesh_of(event: Any) -> int | None:
            if isinstance(event, _TENSOR_EVENTS):
                return data.tensorref_to_mesh_ref.get(event.DTensorRef)
            return data.storage_to_mesh_ref.get(event.storage_id)

        self.data_dag = [e._replace(mesh_ref=mesh_of(e)) for e in self.data_dag]
        for info in data.data_dependency_info.values():
            if info.storage_id is not None:
                info.mesh_ref = data.storage_to_mesh_ref.get(info.storage_id)

    def remove_dag_item_type(self, command_types: str | list[str],
                             print_removed_nodes: bool = False) -> int:
        """Drop the commands whose name starts with any of `command_types`; returns how many."""
        prefixes = (command_types,) if isinstance(command_types, str) else tuple(command_types)
        removed = [c for c in self.control_dag if c.command_name.startswith(prefixes)]
        self.control_dag = [c for c in self.control_dag if not c.command_name.startswith(prefixes)]
        if removed:
            print(f"Removed {len(removed)} DAG items of type(s) {list(prefixes)}.")
            if print_removed_nodes:
                for c in removed:
                    print(f"Command, Worker: {c.worker_rank}, Command ID: {c.command_id}")
        else:
            print(f"No nodes removed of type(s) {list(prefixes)}.")
        return len(removed)

    # ---- timing and exports (ir_export.py) ------------------------------------------------
    def export_command_types(self, output_file: str, include_timing: bool = False,
                             network_config: NetworkConfig | None = None) -> None:
        """Write the JSON catalogue of command types, one entry per timing key with its count
        and shapes; with `include_timing`, estimated microseconds too (also applied to the
        commands, as `import_timing` would)."""
        from monarch._src.simulator import ir_export

        ir_export.export_command_types(self, output_file, include_timing, network_config)

    def import_timing(self, timing: str | dict[str, int]) -> None:
        """Set each command's `duration` from `timing` (timing key -> microseconds, or the
        path of a JSON file holding that mapping)."""
        from monarch._src.simulator import ir_export

        ir_export.import_timing(self, timing)

    def export_dag_json(self, output_file: str) -> None:
        """Chrome trace of the control DAG, every command drawn the same width."""
        from monarch._src.simulator import ir_export

        ir_export.export_dag_json(self, output_file, timed=False)

    def export_dag_json_timed(self, output_file: str) -> None:
        """Chrome trace of the control DAG, each command as long as its imported duration."""
        from monarch._src.simulator import ir_export

        ir_export.export_dag_json(self, output_file, timed=True)

    def export_borrows_csv(self, filename: str) -> None:
        from monarch._src.simulator import ir_export

        ir_export.export_table(dict(self._control.borrows_info), filename, "borrow")

    def export_sendtensors_csv(self, filename: str) -> None:
        from monarch._src.simulator import ir_export

        ir_export.export_table(dict(self._control.sendtensor_info), filename, "SendTensor")

    def export_data_csv(self, filename: str) -> None:
        from monarch._src.simulator import ir_export

        ir_export.export_table(dict(self._data.data_dependency_info), filename, "tensor")

    def export_data_timeline_csv(self, filename: str) -> None:
        from monarch._src.simulator import ir_export

        ir_export.export_table(dict(enumerate(self.data_dag)), filename, "data event")

    def export_memory_viz(self, filename: str) -> None:
        """Pickle a `torch.cuda.memory._snapshot()`-style dict of each device's storages (for
        `torch.cuda._memory_viz`)."""
        from monarch._src.simulator import ir_export

        ir_export.export_memory_viz(self, filename)

    def __repr__(self) -> str:
        return (f"IRGraph({len(self.control_dag)} commands, {len(self.data_dag)} data events, "
                f"{len(self._data.data_dependency_info)} storages)")
