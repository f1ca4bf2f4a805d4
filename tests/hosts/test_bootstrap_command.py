"""spawn_procs(bootstrap_command=...): procs started by a command, on this host and a served one.

What the command sets must hold before the proc's interpreter starts (the use: pick
CUDA_VISIBLE_DEVICES before anything imports CUDA); PYTHONHASHSEED shows that, since Python
reads it only at start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from monarch._rust_bindings.monarch_hyperactor.host_mesh import BootstrapCommand
from monarch.actor import Actor, attach_to_workers, default_bootstrap_cmd, endpoint, this_host
from tests.hosts.conftest import REPO, Workers, worker_env

pytestmark = pytest.mark.timeout(120)


class Env(Actor):
    @endpoint
    def get(self, name: str) -> str | None:
        return os.environ.get(name)

    @endpoint
    def hash_randomized(self) -> bool:
        return bool(sys.flags.hash_randomization)

    @endpoint
    def torch_loaded(self) -> bool:
        return "torch" in sys.modules


def test_command_env_holds_from_interpreter_start_and_the_mesh_is_unchanged() -> None:
    hosts = this_host()
    cmd = default_bootstrap_cmd().with_env({"CUDA_VISIBLE_DEVICES": "3", "PYTHONHASHSEED": "0"})
    procs = hosts.spawn_procs(per_host={"gpus": 2}, bootstrap_command=cmd)
    plain = hosts.spawn_procs(per_host={"gpus": 1})
    try:
        env = procs.spawn("env", Env)
        assert set(env.get.call("CUDA_VISIBLE_DEVICES").get(timeout=60).values()) == {"3"}
        assert set(env.hash_randomized.call().get(timeout=60).values()) == {False}
        other = plain.spawn("env", Env)
        assert other.get.call_one("CUDA_VISIBLE_DEVICES").get(timeout=60) \
            == os.environ.get("CUDA_VISIBLE_DEVICES")
    finally:
        procs.stop().get(timeout=60)
        plain.stop().get(timeout=60)


def test_a_callable_gets_each_procs_point() -> None:
    def per_rank(point: Any) -> BootstrapCommand:
        return default_bootstrap_cmd().with_env(
            {"CUDA_VISIBLE_DEVICES": f"{point['a']}{point['b']}"})

    procs = this_host().spawn_procs(per_host={"a": 2, "b": 2}, bootstrap_command=per_rank)
    try:
        got = procs.spawn("env", Env).get.call("CUDA_VISIBLE_DEVICES").get(timeout=60)
        assert {p["a"] * 10 + p["b"]: v for p, v in got.items()} == \
            {0: "00", 1: "01", 10: "10", 11: "11"}
    finally:
        procs.stop().get(timeout=60)


def test_inherit_env_false_starts_from_the_commands_env_alone(monkeypatch: Any) -> None:
    monkeypatch.setenv("FROM_CLIENT", "yes")
    cmd = default_bootstrap_cmd().with_env({"ONLY": "1"})
    cmd.inherit_env = False
    removed = default_bootstrap_cmd().with_env({"FROM_CLIENT": None})
    procs = this_host().spawn_procs(bootstrap_command=cmd)
    others = this_host().spawn_procs(bootstrap_command=removed)
    try:
        env = procs.spawn("env", Env)
        assert env.get.call_one("FROM_CLIENT").get(timeout=60) is None
        assert env.get.call_one("ONLY").get(timeout=60) == "1"
        assert others.spawn("env", Env).get.call_one("FROM_CLIENT").get(timeout=60) is None
    finally:
        procs.stop().get(timeout=60)
        others.stop().get(timeout=60)


def test_a_wrapper_script_starts_the_proc(tmp_path: Any) -> None:
    wrapper = tmp_path / "launch"
    wrapper.write_text('#!/bin/sh\nexport WRAPPED_BY=$0\nexec "$@"\n')
    wrapper.chmod(0o755)
    cmd = BootstrapCommand(str(wrapper), None,
                           [sys.executable, "-m", "monarch._src.actor.bootstrap_main"], {})
    procs = this_host().spawn_procs(bootstrap_command=cmd)
    try:
        assert procs.spawn("env", Env).get.call_one("WRAPPED_BY").get(timeout=60) == str(wrapper)
    finally:
        procs.stop().get(timeout=60)


def test_wrong_commands_are_refused_at_once() -> None:
    with pytest.raises(TypeError, match="bootstrap_command must be a BootstrapCommand"):
        this_host().spawn_procs(bootstrap_command="python")
    with pytest.raises(TypeError, match="for proc 1 it is int 3"):
        this_host().spawn_procs(per_host={"g": 2},
                                bootstrap_command=lambda p: default_bootstrap_cmd() if p["g"] == 0
                                else 3)


def test_a_missing_program_fails_its_rank_saying_so() -> None:
    # In a process of its own: the failed procs must not touch this test process's client.
    program = textwrap.dedent("""
        from monarch.actor import this_host
        from monarch._rust_bindings.monarch_hyperactor.host_mesh import BootstrapCommand
        procs = this_host().spawn_procs(
            bootstrap_command=BootstrapCommand("/nonexistent/python", None, [], {}))
        try:
            procs.initialized.get(timeout=60)
        except Exception as e:
            print(type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", program], env=worker_env(), cwd=REPO,
                         capture_output=True, timeout=100)
    assert b"program '/nonexistent/python' does not exist on this host" in out.stdout, \
        out.stderr[-3000:]


def test_remote_procs_run_the_command() -> None:
    workers = Workers(["127.0.0.2"])
    try:
        hosts = attach_to_workers(ca="trust_all_connections", workers=workers.addresses)
        try:
            cmd = default_bootstrap_cmd().with_env({"CUDA_VISIBLE_DEVICES": "5",
                                                    "PYTHONHASHSEED": "0"})
            procs = hosts.spawn_procs(per_host={"gpus": 1}, bootstrap_command=cmd)
            actor = procs.spawn("env", Env)
            assert actor.get.call_one("CUDA_VISIBLE_DEVICES").get(timeout=60) == "5"
            assert actor.hash_randomized.call_one().get(timeout=60) is False
            missing = hosts.spawn_procs(
                bootstrap_command=BootstrapCommand("/nonexistent/python", None, [], {}))
            with pytest.raises(Exception, match="does not exist on this host"):
                missing.initialized.get(timeout=60)
        finally:
            hosts.shutdown().get(timeout=30)
    finally:
        workers.close()


_DASK = r"""
import json
from distributed import LocalCluster
from monarch.actor import Actor, default_bootstrap_cmd, endpoint, hosts_from_dask

class Env(Actor):
    @endpoint
    def get(self):
        import os
        return os.environ.get("CUDA_VISIBLE_DEVICES")

with LocalCluster(n_workers=1, processes=True, threads_per_worker=1, dashboard_address=":0",
                  worker_dashboard_address=":0") as cluster:
    hosts = hosts_from_dask(cluster)
    cmd = lambda p: default_bootstrap_cmd().with_env({"CUDA_VISIBLE_DEVICES": str(p["gpus"])})
    mesh = hosts.spawn_procs(per_host={"gpus": 2}, bootstrap_command=cmd).spawn("env", Env)
    got = sorted(mesh.get.call().get(timeout=60).values())
    hosts.shutdown().get(timeout=30)
print(json.dumps(got))
"""


def test_dask_worker_hosts_run_the_command() -> None:
    out = subprocess.run([sys.executable, "-c", _DASK], env=worker_env(), cwd=REPO,
                         capture_output=True, text=True, timeout=100)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == '["0", "1"]'
