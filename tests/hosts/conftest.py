"""Fixtures for the remote-host tests: `monarch worker` processes on loopback addresses.

Each worker is a real OS process running `run_worker_loop_forever` on its own loopback IP
(127.0.0.2, 127.0.0.3, ...), so two workers on this machine look like two hosts. Host loss
and proc death are provoked on purpose here, so, as in tests/faults, a catch-all fault hook sits
under the per-test recorders for the whole package.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from monarch._src.hosts.addresses import free_port  # the host tests import it from here
from tests.conftest import guard_stray_faults
from tests.hosts.netns import wait_listening  # (shared with the chaos benchmark)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker_env() -> dict[str, str]:
    env = dict(os.environ, MONARCH_PRESTART="0", PYTHONPATH=REPO)
    return env


class Workers:
    """`monarch worker --address` processes, one per loopback host."""

    def __init__(self, hosts: list[str]) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.addresses: list[str] = []
        for host in hosts:
            port = free_port(host)
            addr = f"tcp://{host}:{port}"
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "monarch._src.hosts.worker_cli", "--address", addr],
                env=worker_env(), stdin=subprocess.DEVNULL, cwd=REPO,
            ))
            self.addresses.append(addr)
        for proc, host in zip(self.procs, hosts):
            port = int(self.addresses[self.procs.index(proc)].rsplit(":", 1)[1])
            wait_listening(proc, host, port)

    def close(self) -> None:
        end_processes(self.procs)


def end_processes(procs: list[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """SIGTERM every process still running, then SIGKILL those not gone within `timeout`."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


@pytest.fixture
def two_workers() -> Iterator[Workers]:
    """Two fresh worker hosts (127.0.0.2 and 127.0.0.3), ended after the test."""
    workers = Workers(["127.0.0.2", "127.0.0.3"])
    try:
        yield workers
    finally:
        workers.close()


@pytest.fixture(scope="package", autouse=True)
def _stray_fault_guard() -> Iterator[None]:
    yield from guard_stray_faults("tests/hosts")


@pytest.fixture
def fast_host_heartbeats() -> Iterator[None]:
    """Host heartbeats every 100 ms, a host lost after 1.5 s of silence (this test only)."""
    from monarch.config import configured

    with configured(host_heartbeat_interval="100ms", host_heartbeat_timeout="1500ms"):
        yield
