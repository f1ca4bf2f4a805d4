"""The simulator behind the tensor engine: user code against `Simulator(...).mesh`.

Nothing here depends on timing: the assertions are on structure (which tasks, in which order,
on which streams), on memory (exact byte counts) and on outputs (files, their format).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from monarch._src.tensor.fetch import fetch_shard
from monarch._src.tensor.stream import Stream
from monarch.simulator import (
    H100,
    SimulateMode,
    Simulator,
    TraceMode,
    load_history,
    replay,
    set_meta,
)

MIB = 2**20


def sim(tmp_path: Path, hosts: int = 1, gpus: int = 2, **kw: Any) -> Any:
    kw.setdefault("trace_path", str(tmp_path / "trace.json"))
    kw.setdefault("command_history_path", str(tmp_path / "history.pkl"))
    return Simulator(hosts, gpus, **kw)


def test_user_code_runs_and_fetch_returns_fake_values(tmp_path: Path) -> None:
    s = sim(tmp_path)
    with s.mesh.activate():
        w = torch.randn(64, 32)
        x = torch.randn(8, 64)
        y = (x @ w).relu()
        value = fetch_shard(y, host=0, gpu=1).result()
    s.mesh.exit()
    assert type(value) is torch.Tensor
    assert value.shape == (8, 32) and value.dtype == torch.float32
    names = [t.name for t in s.tasks(1)]
    assert names == ["aten::randn", "aten::randn", "aten::mm", "aten::relu"]
    mm = s.tasks(0)[2]
    assert mm.flops == 2 * 8 * 64 * 32 and mm.category == "compute"


def test_peak_memory_matches_known_allocations(tmp_path: Path) -> None:
    s = sim(tmp_path, simulate_mode="simulate_with_report_only")
    # Deletions travel with the next batch: leaving activate() flushes, fixing the order.
    with s.mesh.activate():
        a = torch.zeros(1024, 256)  # 1 MiB
        v = a.view(256, 1024)  # view
        t = a.t()  # view
        a.add_(1.0)  # in place
        b = v * 2  # 1 MiB: live 2 MiB
        del v, t
    with s.mesh.activate():
        c = torch.ones(512, 512, dtype=torch.float64)  # 2 MiB: live 4 MiB
        del b
    with s.mesh.activate():
        d = c[:10].clone()  # 40 KiB: live 3 MiB + 40 KiB
        del a, c, d
    s.mesh.exit()
    assert s.peak_memory() == {0: 4 * MIB, 1: 4 * MIB}
    assert [w.live for w in s.session.model.workers] == [0, 0]
    assert not Path(tmp_path / "trace.json").exists()  # report only


def test_streams_borrows_and_reduce(tmp_path: Path) -> None:
    s = sim(tmp_path, gpus=4)
    other = Stream("other")
    with s.mesh.activate():
        x = torch.randn(128, 128)
        with other.activate():
            y = torch.randn(128, 128)
        xb, borrow = other.borrow(x)
        with other.activate():
            z = xb + y
            total = z.reduce("gpu", reduction="sum")
        borrow.drop()
        gathered = x.reduce("gpu", reduction="stack")
        assert tuple(gathered.shape) == (4, 128, 128)
        with other.activate():  # a tensor is fetched on its own stream
            fetch_shard(total).result()
    s.mesh.exit()
    tasks = s.tasks(0)
    streams = {t.stream for t in tasks}
    assert streams == {"main", "other"}
    add = next(t for t in tasks if t.name.startswith("aten::add"))
    first = next(t for t in tasks if t.name == "aten::randn" and t.stream == "main")
    assert add.stream == "other" and add.start >= first.end  # waited for the main stream
    colls = [t for t in tasks if t.category == "collective"]
    assert [(t.name, t.stream) for t in colls] == [("all_reduce(sum)", "other"),
                                                   ("all_gather", "main")]
    for rank in range(1, 4):
        other_colls = [t for t in s.tasks(rank) if t.category == "collective"]
        assert [(t.start, t.end) for t in other_colls] == [(t.start, t.end) for t in colls]
    per_stream = s.stream_peak_memory()[0]
    assert per_stream["other"] == 3 * 128 * 128 * 4  # y, z, total (the borrow adds nothing)


def test_chrome_trace_format(tmp_path: Path) -> None:
    s = sim(tmp_path, trace_mode="EVERYTHING")
    other = Stream("side")
    with s.mesh.activate():
        a = torch.ones(10)
        with other.activate():
            torch.zeros(10)
        fetch_shard(a).result()
    s.mesh.exit()
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = trace["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {(0, "controller"), (1, "worker 0"), (2, "worker 1")}
    threads = {(e["pid"], e["args"]["name"]) for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(1, "main"), (1, "side"), (2, "main"), (2, "side")} <= threads
    cats = {e.get("cat") for e in events if e["ph"] in ("X", "C")}
    assert {"compute", "memory", "controller"} <= cats
    for e in events:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0
        if e["ph"] == "C":
            assert set(e["args"]) == {"allocated (MB)"}
    assert any(e["name"] == "fetch" and e["pid"] == 0 for e in events if e["ph"] == "X")


def test_trace_modes_select_events(tmp_path: Path) -> None:
    for mode, want_controller, want_workers in (("controller_trace_only", True, False),
                                                ("stream_only", False, True)):
        s = sim(tmp_path, trace_mode=mode)
        with s.mesh.activate():
            torch.ones(3)
        s.mesh.exit()
        pids = {e["pid"] for e in json.loads((tmp_path / "trace.json").read_text())[
            "traceEvents"]}
        assert (0 in pids) == want_controller
        assert (1 in pids) == want_workers


def test_group_identical_workers(tmp_path: Path) -> None:
    s = sim(tmp_path, hosts=2, gpus=4, group_workers=True)
    with s.mesh.activate():
        x = torch.ones(100)
        x.reduce("gpu")  # groups of 4 ranks: both hosts do the same
    s.mesh.exit()
    assert s.worker_groups() == [list(range(8))]
    procs = [e for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"]
    assert [p["args"]["name"] for p in procs] == ["workers 0-7 (8 identical)"]


def test_set_meta_tags_tasks(tmp_path: Path) -> None:
    s = sim(tmp_path)
    with s.mesh.activate():
        a = torch.ones(4)
        with set_meta("forward"):
            b = a * 2
            with set_meta("inner"):
                b.relu()
        a + 1
    s.mesh.exit()
    tags = [(t.name, t.tag) for t in s.tasks(0)]
    assert tags == [("aten::ones", None), ("aten::mul.Tensor", "forward"),
                    ("aten::relu", "inner"), ("aten::add.Tensor", None)]


def test_iterations_report_time_and_peak(tmp_path: Path) -> None:
    s = sim(tmp_path)
    with s.mesh.activate():
        for _ in range(3):
            x = torch.ones(1024, 1024)  # 4 MiB, the previous x freed later
            y = x @ x
            s.step()
            del x, y
    s.mesh.exit()
    its = s.iterations
    assert len(its) == 3
    assert all(it.time > 0 for it in its)
    assert its[0].peak_bytes == 8 * MIB
    report = s.iteration_report()
    assert report[0][1] == pytest.approx(8 * MIB / 1e6)


def test_command_history_and_standalone_replay(tmp_path: Path) -> None:
    s = sim(tmp_path, simulate_mode="everything")
    with s.mesh.activate():
        a = torch.randn(32, 32)
        b = (a @ a).reduce("gpu")
        fetch_shard(b).result()
        s.step()
    s.mesh.exit()
    history = load_history(str(tmp_path / "history.pkl"))
    assert history["labels"] == ("host", "gpu") and history["sizes"] == (1, 2)
    assert [k for k, _, _ in history["events"]].count("fetch") == 1
    r = replay(str(tmp_path / "history.pkl"), profile="H100")
    assert [t.name for t in r.tasks(0)] == [t.name for t in s.tasks(0)]
    assert r.peak_memory() == s.peak_memory()
    assert len(r.iterations) == 1


def test_command_history_mode_records_only(tmp_path: Path) -> None:
    s = sim(tmp_path, simulate_mode=SimulateMode.COMMAND_HISTORY)
    with s.mesh.activate():
        torch.ones(3) + 1
    s.mesh.exit()
    assert (tmp_path / "history.pkl").exists()
    assert not (tmp_path / "trace.json").exists()
    assert s.tasks(0) == []


def test_replay_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps({"something": 1}))
    with pytest.raises(ValueError, match="not a monarch command history file"):
        replay(str(bad))


def test_modes_parse_and_bad_arguments(tmp_path: Path) -> None:
    s = sim(tmp_path, simulate_mode="Simulate_With_Report_Only", trace_mode=TraceMode.STREAM_ONLY)
    assert s.simulate_mode is SimulateMode.SIMULATE_WITH_REPORT_ONLY
    s.mesh.exit()
    with pytest.raises(ValueError, match="Unknown simulate_mode 'fast'"):
        Simulator(1, 1, simulate_mode="fast")
    with pytest.raises(ValueError, match="Unknown trace_mode"):
        Simulator(1, 1, trace_mode=3)
    with pytest.raises(ValueError, match="gpus must be a positive int"):
        Simulator(1, 0)
    with pytest.raises(ValueError, match="Unknown device profile 'tpu'"):
        Simulator(1, 1, profile="tpu")
    with pytest.raises(NotImplementedError, match="perfetto"):
        Simulator(1, 1, upload_trace=True)


def test_export_ir_needs_build_ir(tmp_path: Path) -> None:
    s = sim(tmp_path)
    with pytest.raises(ValueError, match="build_ir=True"):
        s.export_ir(str(tmp_path / "ir.pt"))
    s.mesh.exit()
    s = sim(tmp_path, build_ir=True)
    with s.mesh.activate():
        a = torch.ones(2)
        a * 3
    path = s.export_ir(str(tmp_path / "ir.pt"))
    s.mesh.exit()
    ir = torch.load(path, weights_only=False)
    names = [(c.worker_rank, c.command_name) for c in ir.control_dag]
    assert names == [(0, "CallFunction: aten.ones"), (1, "CallFunction: aten.ones"),
                     (0, "CallFunction: aten.mul"), (1, "CallFunction: aten.mul")]


def test_display_is_offline_html(tmp_path: Path) -> None:
    s = sim(tmp_path)
    with s.mesh.activate():
        torch.ones(3).reduce("gpu")
    s.mesh.exit()
    page = s._repr_html_()
    assert "<svg" in page and "all_reduce(sum)" in page
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org", "")


def test_profiles_and_overrides() -> None:
    from monarch.simulator import H200, get_profile

    assert H200.memory_bandwidth > H100.memory_bandwidth
    assert H100.matmul_rate("torch.bfloat16") == pytest.approx(2 * H100.matmul_rate("float32"))
    assert get_profile("h200") is H200
    faster = H100.with_overrides(memory_bandwidth=1e13)
    assert faster.memory_bandwidth == 1e13 and faster.name == "H100"
    with pytest.raises(TypeError, match="no field"):
        H100.with_overrides(bandwith=1)


def test_remote_with_propagator_and_fetch_cost(tmp_path: Path) -> None:
    from monarch._src.tensor.remote import remote

    double = remote("tests.simulator.remote_fns.double", propagate=lambda x: x.clone())
    s = sim(tmp_path)
    with s.mesh.activate():
        x = torch.ones(16)
        y = double(x)
        out = fetch_shard(y).result()
    s.mesh.exit()
    assert out.shape == (16,)
    assert [t.category for t in s.tasks(0)] == ["compute", "remote"]


def test_memory_snapshot_for_torch_memory_viz(tmp_path: Path) -> None:
    from torch.cuda import _memory_viz

    s = sim(tmp_path)
    with s.mesh.activate():
        a = torch.ones(256)
        b = a * 2
        del b
    s.mesh.exit()
    snap = s.memory_snapshot(str(tmp_path / "snap.pkl"))
    actions = [(e["action"], e["size"]) for e in snap["device_traces"][0]]
    assert actions == [("alloc", 1024), ("alloc", 1024), ("free_requested", 1024),
                       ("free_completed", 1024)]
    with open(tmp_path / "snap.pkl", "rb") as f:
        html = _memory_viz.trace_plot(pickle.load(f))
    assert "snapshot.pickle" in html


def test_pipelining_between_host_slices(tmp_path: Path) -> None:
    s = sim(tmp_path, hosts=2, gpus=2)
    stage0, stage1 = s.mesh.slice(host=0), s.mesh.slice(host=1)
    with stage0.activate():
        a = torch.ones(256, 256)
        b = a.to_mesh(stage1)
    with stage1.activate():
        c = b * 2
        assert fetch_shard(c).result().shape == (256, 256)
    s.mesh.exit()
    assert [t.name for t in s.tasks(0)] == ["aten::ones", "send 0->2"]
    assert [t.name for t in s.tasks(2)] == ["send 0->2", "aten::mul.Tensor"]
    send0, send2 = s.tasks(0)[1], s.tasks(2)[0]
    assert (send0.start, send0.end) == (send2.start, send2.end)
    assert send0.start >= s.tasks(0)[0].end  # the sender waited for its value
    assert s.tasks(2)[1].start >= send2.end  # the receiver's op waited for the transfer
    nbytes = 256 * 256 * 4
    assert s.peak_memory() == {0: nbytes, 1: nbytes, 2: 2 * nbytes, 3: 2 * nbytes}


def test_cpu_tensors_on_host_cost_cpu_time(tmp_path: Path) -> None:
    s = sim(tmp_path, cpu_tensors="host")
    with s.mesh.activate():
        a = torch.ones(512, 512)
        a @ a
    s.mesh.exit()
    mm = s.tasks(0)[1]
    assert mm.category == "cpu"
    assert s.session.model.workers[0].host_free >= mm.end  # the worker's thread was busy
    with pytest.raises(ValueError, match="cpu_tensors must be 'device' or 'host'"):
        Simulator(1, 1, cpu_tensors="gpu")
