"""Recording the command stream of a REAL tensor engine and replaying it standalone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from monarch._src.tensor.fetch import fetch_shard
from monarch.simulator import Simulator, load_history, record, replay


def program(dim: str) -> Any:
    """Four 16 KiB allocations, all kept alive until the caller drops them."""
    a = torch.ones(64, 64)
    m = a @ a
    b = m.relu()
    c = b.reduce(dim, reduction="avg")
    return a, m, b, c


@pytest.mark.timeout(120)
def test_record_real_run_and_replay(procs2: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "real.pkl")
    with procs2.activate():
        with record(procs2, path) as rec:
            values = program("gpus")
            real = fetch_shard(values[3]).result(timeout=60)
            rec.step()
        del values
    assert torch.equal(real, torch.full((64, 64), 64.0))  # the real engine really ran
    history = load_history(path)
    assert history["sizes"] == (2,)
    kinds = [k for k, _, _ in history["events"]]
    assert kinds.count("fetch") == 1 and kinds[-1] == "step"
    replayed = replay(path, profile="H100")
    names = [t.name for t in replayed.tasks(0)]
    assert names == ["aten::ones", "aten::mm", "aten::relu", "all_reduce(avg)"]
    # the same program on a simulated mesh allocates exactly the same
    s = Simulator(1, 2, simulate_mode="simulate_with_report_only")
    with s.mesh.activate():
        values2 = program("gpu")
        fetch_shard(values2[3]).result()
    s.mesh.exit()
    assert replayed.peak_memory() == s.peak_memory() == {0: 4 * 64 * 64 * 4, 1: 4 * 64 * 64 * 4}
    assert [t.name for t in s.tasks(0)] == names


def test_record_rejects_non_meshes(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="record\\(\\) needs a proc mesh or a DeviceMesh"):
        with record(object(), str(tmp_path / "x.pkl")):
            pass


@pytest.mark.timeout(120)
def test_engine_profile_measures_the_real_engine(procs2: Any) -> None:
    from monarch.simulator import engine_profile

    p = engine_profile(procs2, repeat=3)
    assert p.kind == "cpu" and p.name == "cpu (engine, 2 workers)"
    assert p.worker_overhead > 0 and p.message_latency >= 0
    assert p.matmul_rate("float32") > 0 and p.collective_latency and p.collective_latency > 0
    s = Simulator(1, 2, profile=p, simulate_mode="simulate_with_report_only")
    assert s.session.model.comm.hop_latency == p.collective_latency
    s.mesh.exit()


def test_threads_per_worker() -> None:
    from monarch.simulator import threads_per_worker

    assert threads_per_worker(2, 2) == 1
    assert threads_per_worker(4, 16) == 4
    assert threads_per_worker(8, 2) == 1
