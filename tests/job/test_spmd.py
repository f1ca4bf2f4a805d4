"""monarch.spmd: the torchrun environment, and a plain DDP script run unchanged on a 2x2 mesh."""

from __future__ import annotations

import os
import pathlib

import pytest

from monarch._src.job.torchrun import torch_elastic_env
from monarch.actor import Actor, MeshFailure, endpoint, this_host
from monarch.spmd import SPMDActor, setup_torch_elastic_env

SCRIPT = os.path.join(os.path.dirname(__file__), "ddp_script.py")
TIMEOUT = 60.0


class EnvReader(Actor):
    @endpoint
    def env(self) -> dict[str, str]:
        keys = ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_RANK",
                "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
                "MASTER_PORT")
        return {k: os.environ[k] for k in keys}


def test_torch_elastic_env_for_2x4() -> None:
    env = torch_elastic_env(6, [2, 4])
    assert env == {
        "RANK": "6", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "8",
        "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "ROLE_RANK": "6", "ROLE_WORLD_SIZE": "8",
        "ROLE_NAME": "rank",
    }


def test_setup_torch_elastic_env_visible_to_later_actors(procs4) -> None:
    mesh = procs4.split(gpus=("node", "local"), local=2)
    assert setup_torch_elastic_env(mesh, "127.0.0.1", 29511) is None
    envs = mesh.spawn("env_reader", EnvReader).env.call().get(timeout=TIMEOUT)
    by_rank = {point.rank: env for point, env in envs.items()}
    assert [by_rank[r]["RANK"] for r in range(4)] == ["0", "1", "2", "3"]
    assert [by_rank[r]["LOCAL_RANK"] for r in range(4)] == ["0", "1", "0", "1"]
    assert [by_rank[r]["GROUP_RANK"] for r in range(4)] == ["0", "0", "1", "1"]
    assert {e["WORLD_SIZE"] for e in by_rank.values()} == {"4"}
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in by_rank.values()} == {
        ("127.0.0.1", "29511")}


def test_setup_torch_elastic_env_needs_both_addr_and_port(procs2) -> None:
    with pytest.raises(AssertionError, match="Either both master_addr and master_port must be "
                       "specified or neither must be specified."):
        setup_torch_elastic_env(procs2, master_addr="127.0.0.1")


def test_main_with_empty_script_raises(procs2) -> None:
    from monarch.actor import ActorError

    actors = procs2.spawn("spmd_empty", SPMDActor)
    with pytest.raises(ActorError, match="needs the script to run"):
        actors.main.call("127.0.0.1", 1, []).get(timeout=TIMEOUT)


def _losses(out_dir: str, world: int) -> set[str]:
    return {pathlib.Path(out_dir, f"loss_{r}.txt").read_text() for r in range(world)}


def run_ddp(procs, out_dir: str, *extra: str):
    actors = procs.spawn("_SPMDActor", SPMDActor)
    first = actors.slice(**{k: 0 for k in actors.sizes})
    host, port = first.get_host_port.call_one(None).get(timeout=TIMEOUT)
    return actors.main.call(host, port, [SCRIPT, "--out-dir", out_dir, *extra])


@pytest.mark.timeout(120)
def test_ddp_script_on_2x2_mesh_ranks_agree_on_loss(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    procs = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 2})
    try:
        result = run_ddp(procs, str(tmp_path)).get(timeout=90)
        assert list(result.values()) == [True] * 4
        losses = _losses(str(tmp_path), 4)
        assert len(losses) == 1, losses  # same loss and same weights on every rank
    finally:
        procs.stop().get(timeout=TIMEOUT)


@pytest.mark.timeout(120)
def test_ddp_rank_crash_is_a_supervision_event(tmp_path, monkeypatch, fault_recorder) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    procs = this_host().spawn_procs(per_host={"hosts": 1, "gpus": 2}, name="ddp_crash")
    try:
        fut = run_ddp(procs, str(tmp_path), "--crash-rank", "1")
        texts = fault_recorder.wait_for(1, timeout=90)
        assert "_SPMDActor" in texts[0] and "crashed_ranks=[1]" in texts[0], texts
        # the exit status, in either wording (torchmonarch's "exited with non-zero code 3")
        assert "Exited(3)" in texts[0] or "exited with non-zero code 3" in texts[0], texts
        assert isinstance(fault_recorder.failures[0], MeshFailure)
        with pytest.raises(Exception, match="failed"):
            fut.get(timeout=TIMEOUT)
    finally:
        procs.stop().get(timeout=TIMEOUT)


def test_serve_parses_torchrun_command_lines() -> None:
    from monarch._src.spmd.serve import parse_torchrun
    from monarch.job.spmd import SPMDJob, serve

    assert parse_torchrun(["torchrun", "--nnodes=2", "--nproc-per-node", "4", "train.py",
                           "--lr", "0.1"]) == (2, 4, ["train.py", "--lr", "0.1"])
    assert parse_torchrun(["torchrun", "--standalone", "--nproc_per_node=2", "-m", "pkg.train"]
                          ) == (1, 2, ["-m", "pkg.train"])
    job = serve(["torchrun", "--nproc-per-node=2", "train.py"])
    assert isinstance(job, SPMDJob) and not job.active
    with pytest.raises(ValueError, match="names no script"):
        serve(["torchrun", "--nnodes=1"])
    with pytest.raises(ValueError, match="elastic"):
        serve(["torchrun", "--nnodes=1:2", "train.py"])
    with pytest.raises(NotImplementedError, match="scheduler='local'"):
        serve(["torchrun", "train.py"], scheduler="mast_conda")
    with pytest.raises(NotImplementedError, match="torchx AppDefs"):
        serve(object())
