"""HostMesh.sync_workspace(Workspace(...)): mirror directories under each host's
$WORKSPACE_DIR (torchmonarch 0.7.0's API over our content-hashed sync)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from monarch.actor import Actor, attach_to_workers, endpoint, this_host
from monarch.tools.config import CondaEnvironment, Workspace
from tests.hosts.conftest import Workers


class Reader(Actor):
    @endpoint
    def read(self, rel: str) -> str:
        with open(os.path.join(os.environ["WORKSPACE_DIR"], rel)) as f:
            return f.read()


@pytest.mark.timeout(120)
def test_sync_to_remote_hosts_lands_under_their_workspace_dir(tmp_path: Any,
                                                              monkeypatch: Any) -> None:
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "mod.py").write_text("VALUE = 1\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("notes")
    remote_root = tmp_path / "remote_ws"
    monkeypatch.setenv("WORKSPACE_DIR", str(remote_root))  # the workers inherit it
    workers = Workers(["127.0.0.2"])
    try:
        hosts = attach_to_workers(ca="trust_all_connections", workers=workers.addresses)
        try:
            ws = Workspace(dirs={proj: "code/proj", str(other): "other"})
            assert asyncio.run(hosts.sync_workspace(ws)) is None
            readers = hosts.spawn_procs().spawn("reader", Reader)
            assert readers.read.call_one("code/proj/pkg/mod.py").get(timeout=60) == "VALUE = 1\n"
            assert readers.read.call_one("other/notes.txt").get(timeout=60) == "notes"
            # a change travels on the next sync; procs see it
            (proj / "pkg" / "mod.py").write_text("VALUE = 2\n")
            asyncio.run(hosts.sync_workspace(Workspace(dirs=[proj])))  # lands at "proj"
            assert readers.read.call_one("proj/pkg/mod.py").get(timeout=60) == "VALUE = 2\n"
            with pytest.raises(RuntimeError, match="sliced host mesh"):
                asyncio.run(hosts.slice(hosts=0).sync_workspace(ws))
        finally:
            hosts.shutdown().get(timeout=30)
    finally:
        workers.close()


@contextlib.contextmanager
def _worker_host(ip: str) -> Iterator[Any]:
    """One `monarch worker` host on this machine (at `ip`), attached."""
    workers = Workers([ip])
    try:
        hosts = attach_to_workers(ca="trust_all_connections", workers=workers.addresses)
        try:
            yield hosts
        finally:
            hosts.shutdown().get(timeout=30)
    finally:
        workers.close()


@pytest.mark.timeout(120)
def test_sync_to_a_host_of_this_machine_and_bad_arguments(tmp_path: Any,
                                                          monkeypatch: Any) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("a")
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "ws"))
    with _worker_host("127.0.0.3") as host:
        asyncio.run(host.sync_workspace(Workspace(dirs=[str(proj)])))
        assert (tmp_path / "ws" / "proj" / "a.txt").read_text() == "a"
        with pytest.raises(TypeError, match="takes a monarch.tools.config.Workspace"):
            asyncio.run(host.sync_workspace(str(proj)))
        with pytest.raises(NotADirectoryError, match="does not exist"):
            asyncio.run(host.sync_workspace(Workspace(dirs=[str(tmp_path / "missing")])))
        with pytest.raises(NotImplementedError, match="spawn_procs\\(\\) again"):
            asyncio.run(host.sync_workspace(Workspace(dirs=[str(proj)]), auto_reload=True))
    # As on torchmonarch: this_host() (and any view of it) is no mesh to sync a workspace to.
    for local in (this_host(), this_host().slice()):
        with pytest.raises(RuntimeError, match="cannot call sync_workspace on a sliced host"):
            asyncio.run(local.sync_workspace(Workspace(dirs=[str(proj)])))
    with pytest.raises(TypeError, match="list or dict"):
        Workspace(dirs=str(proj))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        Workspace(dirs=[""])


@pytest.mark.timeout(120)
def test_conda_true_mirrors_the_environment_at_its_own_path(tmp_path: Any,
                                                            monkeypatch: Any) -> None:
    env = tmp_path / "fake_env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "tool").write_text("#!/bin/sh\n")
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "ws"))
    ws = Workspace(dirs=[], env=CondaEnvironment(conda_prefix=str(env)))
    with _worker_host("127.0.0.4") as host:
        # a host of this machine: the environment is already at its path, so nothing changes
        asyncio.run(host.sync_workspace(ws, conda=True))
        assert (env / "bin" / "tool").read_text() == "#!/bin/sh\n"
        monkeypatch.delenv("CONDA_PREFIX", raising=False)
        monkeypatch.delenv("VIRTUAL_ENV", raising=False)
        monkeypatch.setattr(sys, "prefix", sys.base_prefix)  # as if no virtualenv were active
        with pytest.raises(ValueError, match="found no environment to sync"):
            asyncio.run(host.sync_workspace(Workspace(dirs=[], env=None), conda=True))
