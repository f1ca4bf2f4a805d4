"""The host-agent registry (mesh/host_agent.py) and the proc set-up that travels in the spec.

The registry lists the host agents live in this process, each with a snapshot of its proc
tables; the proc set-up ("module:function" names from the `proc_setup` hook slot) runs in every
proc, on this machine, on remote hosts and under `with_python_executable`.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest

from monarch._src.mesh import host_agent
from monarch._src.mesh.proc_mesh import proc_table
from monarch.actor import Actor, attach_to_workers, endpoint, this_host
from tests.hosts.conftest import Workers

pytestmark = pytest.mark.timeout(180)
TRUST = "trust_all_connections"


class Probe(Actor):
    @endpoint
    def wired(self) -> bool:
        """Whether the proc wiring ran here (proc_main itself does not import the debugger)."""
        return "monarch._src.debug.agent" in sys.modules


def test_the_local_agent_is_registered_with_a_snapshot_of_its_tables() -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2}, name="registered")
    try:
        procs.initialized.get(timeout=60)
        table = proc_table(procs)
        local = [a for a in host_agent.agents() if a.is_local]
        assert len(local) == 1
        agent = local[0]
        placed = [p for p in agent.snapshot() if p.table is table]
        assert len(placed) == 1
        assert placed[0].hosts == (socket.gethostname(),) * 2
        assert set(table.keys) <= set(agent.live_addresses())
        assert procs.spawn("probe", Probe).wired.call().get(timeout=60).values() == [True, True]
    finally:
        procs.stop().get(timeout=60)
    assert all(p.table is not table for p in agent.snapshot())


def test_a_remote_agent_is_registered_until_shutdown(two_workers: Workers) -> None:
    hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses, name="registry")
    hosts.initialized.get(timeout=60)
    agent = hosts.agent
    assert not agent.is_local
    assert any(a is agent for a in host_agent.agents())
    procs = hosts.spawn_procs(per_host={"gpus": 1})
    try:
        procs.initialized.get(timeout=60)
        table = proc_table(procs)
        (placed,) = [p for p in agent.snapshot() if p.table is table]
        assert placed.hosts == tuple(two_workers.addresses)
        assert set(agent.live_addresses()) == set(table.keys)
        # The spec carried the proc set-up to the worker hosts.
        assert procs.spawn("probe", Probe).wired.call().get(timeout=60).values() == [True, True]
    finally:
        hosts.shutdown().get(timeout=60)
    assert all(a is not agent for a in host_agent.agents())


def test_procs_of_another_interpreter_run_the_set_up_too(tmp_path: Any) -> None:
    link = tmp_path / "python-for-procs"
    link.symlink_to(sys.executable)
    procs = this_host().with_python_executable(str(link)).spawn_procs()
    try:
        assert procs.spawn("probe", Probe).wired.call_one().get(timeout=60) is True
    finally:
        procs.stop().get(timeout=60)
