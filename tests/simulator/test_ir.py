"""The IR graph of a simulated program (`Simulator(..., build_ir=True).ir`): which nodes the
commands make, which storages tensors share, and the exports (timing keys, estimated and
imported timing, the DAG trace, tables, memory snapshot)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from monarch._src.tensor.stream import Stream
from monarch.simulator import Simulator
from monarch.simulator.communication_model import NetworkConfig
from monarch.simulator.ir import (
    IRGraph,
    StorageCreationEvent,
    StorageDeletionEvent,
    TensorCreationEvent,
    TensorMutationEvent,
)
from monarch.simulator.profiling import estimate_function_us, expand_func_path, profile_function

pytestmark = pytest.mark.timeout(60)


def program(tmp_path: Path) -> Any:
    """2 hosts x 2 gpus: a view, an in-place op, a borrow, an all-reduce, a send, a delete."""
    s = Simulator(2, 2, trace_path="", command_history_path="", build_ir=True)
    stage0, stage1 = s.mesh.slice(host=0), s.mesh.slice(host=1)
    with stage0.activate():
        a = torch.ones(4, 8)
        v = a.t()  # a view: same storage
        v.mul_(2)  # in place: a mutation of that storage
        other = Stream("other")
        b, borrow = other.borrow(a)
        with other.activate():
            c = b + 1
            c.reduce("gpu", "sum")
        borrow.drop()
        sent = a.to_mesh(stage1)
        del c
        torch.zeros(1)  # the deletion travels with the next command
    return s, (a, v, sent)  # kept alive: the caller's IR sees them undeleted


def names(ir: IRGraph, rank: int) -> list[str]:
    return [c.command_name for c in ir.control_dag if c.worker_rank == rank]


def test_commands_become_one_node_per_worker(tmp_path: Path) -> None:
    s, _kept = program(tmp_path)
    ir = s.ir
    s.mesh.exit()
    rank0 = names(ir, 0)
    assert rank0[:4] == ["CallFunction: aten.ones", "CallFunction: aten.t",
                         "CallFunction: aten.mul_", rank0[3]]
    assert rank0[3].startswith("BorrowCreate: ")
    assert rank0[4] == "CallFunction: aten.add"
    assert rank0[5].startswith("Reduce: all_reduce: ") and rank0[6].startswith("BorrowDrop: ")
    assert rank0[7].startswith("SendTensor: ")
    assert names(ir, 2) == [rank0[7]]  # the receiver runs only the send
    reduce = next(c for c in ir.control_dag if c.command_name.startswith("Reduce"))
    assert reduce.devices == [0, 1]  # the group, not the whole mesh
    send = next(c for c in ir.control_dag if c.command_name.startswith("SendTensor"))
    assert send.devices == [0, 1, 2, 3]  # senders, then receivers
    drop = next(c for c in ir.control_dag if c.command_name.startswith("BorrowDrop"))
    create = next(c for c in ir.control_dag if c.command_name.startswith("BorrowCreate"))
    assert drop.stream_name == "main" and create.stream_name == "other"
    assert drop.control_dependencies == [create.command_id]


def test_views_in_place_results_and_borrows_share_their_storage(tmp_path: Path) -> None:
    s, _kept = program(tmp_path)
    ir = s.ir
    s.mesh.exit()
    created = [e for e in ir.data_dag if type(e) is TensorCreationEvent]
    a, v = created[0], created[1]
    assert a.storage_id == v.storage_id and v.dims == (8, 4) and a.dtype is torch.float32
    borrowed = next(e for e in created if e.stream_name == "other")
    assert borrowed.storage_id == a.storage_id
    mutations = [e for e in ir.data_dag if type(e) is TensorMutationEvent]
    assert [m.storage_id for m in mutations] == [a.storage_id]
    storages = [e for e in ir.data_dag if type(e) is StorageCreationEvent]
    assert storages[0].size == 4 * 8 * 4 and storages[0].devices == [0, 1]
    freed = {e.storage_id: e.devices for e in ir.data_dag if type(e) is StorageDeletionEvent}
    add = next(e for e in created if e.command_id == names_ids(ir)["CallFunction: aten.add"])
    assert freed[add.storage_id] == [0, 1]  # c, deleted on the ranks holding it
    assert a.storage_id not in freed  # a, its view and its borrow share one live storage


def names_ids(ir: IRGraph) -> dict[str, int]:
    return {c.command_name: c.command_id for c in ir.control_dag}


def test_command_types_with_timing_are_applied_to_the_graph(tmp_path: Path) -> None:
    s, _kept = program(tmp_path)
    ir = s.ir
    s.mesh.exit()
    path = tmp_path / "types.json"
    ir.export_command_types(str(path), include_timing=True, network_config=NetworkConfig())
    data = json.loads(path.read_text())
    by_key = {e["timing_key"]: e for e in data["command_types"]}
    assert by_key["CallFunction:aten.ones:(4x8):float32"]["count"] == 2
    assert by_key["Reduce:all_reduce:(4x8):float32:2"]["num_devices"] == 2
    assert "SendTensor:(4x8):float32" in by_key and "BorrowCreate" in by_key
    assert by_key["CallFunction:aten.add:(4x8):float32"]["func_path"] == "torch.ops.aten.add"
    assert all(v > 0 for v in data["timing"].values())
    assert {c.duration for c in ir.control_dag} == set(data["timing"].values())
    ir.import_timing({"BorrowCreate": 7})
    assert {c.duration for c in ir.control_dag if c.command_name.startswith("BorrowCreate")} \
        == {7}


def test_exports_write_their_files(tmp_path: Path, capsys: Any) -> None:
    s, _kept = program(tmp_path)
    ir = s.ir
    s.mesh.exit()
    ir.export_dag_json_timed(str(tmp_path / "timed.json"))
    assert "have no timing data" in capsys.readouterr().out
    ir.export_dag_json(str(tmp_path / "dag.json"))
    events = json.loads((tmp_path / "dag.json").read_text())["traceEvents"]
    sends = [e for e in events if e["cat"] == "SendTensor"]
    assert len(sends) == 4 and len({e["ts"] for e in sends}) == 1  # one transfer, together
    for export in ("borrows", "sendtensors", "data", "data_timeline"):
        getattr(ir, f"export_{export}_csv")(str(tmp_path / f"{export}.tsv"))
        header = (tmp_path / f"{export}.tsv").read_text().splitlines()[0]
        assert "\t" in header
    ir.export_memory_viz(str(tmp_path / "mem.pkl"))
    snapshot = pickle.loads((tmp_path / "mem.pkl").read_bytes())
    assert len(snapshot["device_traces"]) == 4
    assert ir.remove_dag_item_type(["Borrow"]) == 4
    assert not [c for c in ir.control_dag if c.command_name.startswith("Borrow")]


def test_ir_needs_build_ir_and_delete_names_the_tensor() -> None:
    s = Simulator(1, 1, trace_path="", command_history_path="")
    with pytest.raises(ValueError, match=r"build_ir=True"):
        s.ir  # noqa: B018
    s.mesh.exit()
    with pytest.raises(KeyError, match=r"tensor 5 is not in the graph"):
        IRGraph().delete_tensor(5, [0], "main", 1, ())
    with pytest.raises(ValueError, match=r"timing key -> microseconds"):
        IRGraph().import_timing([1])  # type: ignore[arg-type]


def test_operator_times() -> None:
    assert expand_func_path("aten.mm") == "torch.ops.aten.mm"
    small = estimate_function_us("aten.mm", [((64, 64), torch.float32)] * 2)
    large = estimate_function_us("aten.mm", [((4096, 4096), torch.float32)] * 2)
    assert 0 < small < large
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="estimate_function_us"):
            profile_function("aten.mm", [((4, 4), torch.float32)] * 2)
    with pytest.raises(ValueError, match="Cannot resolve operator 'nope.nothing'"):
        estimate_function_us("nope.nothing", [((1,), None)])
