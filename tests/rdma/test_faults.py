"""RDMA transfers whose owner died, stalled or was refused by the kernel: fail fast, never hang.

Each test that kills or stops a proc spawns its own proc mesh and stops it in a `finally`. The
client's fault hook (`fault_recorder`) receives the proc-death report; the transfer itself must
fail with `SupervisionError` on every plane, whether the death is already known or not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from monarch._src.rdma import transfer, vm
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import this_host
from monarch.rdma import RDMABuffer
from tests.pidwait import exits
from tests.rdma.actors import Owner

pytestmark = pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning")

T = 30.0
PLANES = ["process_vm", "shm", "tcp"]


@contextlib.contextmanager
def owner_proc() -> Iterator[tuple[Any, Any, int]]:
    """A one-proc mesh of this test's own with an `Owner(4096)`; yields (procs, owner, pid)."""
    procs = this_host().spawn_procs(per_host={"procs": 1})
    try:
        owner = procs.spawn("rdma_fault_owner", Owner, 4096)
        yield procs, owner, owner.pid.call_one().get(timeout=T)
    finally:
        procs.stop().get(timeout=T)


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("plane", PLANES)
def test_transfer_to_killed_owner_raises_supervision_error(
    plane: str, force_plane: Any, fault_recorder: Any
) -> None:
    force_plane(plane)
    with owner_proc() as (_, owner, pid):
        buf = owner.make.call_one().get(timeout=T)
        dst = torch.empty(4096, dtype=torch.uint8)
        buf.read_into(dst).get(timeout=T)
        os.kill(pid, signal.SIGKILL)
        # A killed process reads as before until the kernel has taken its memory.
        assert exits(pid, T), f"process {pid} did not exit within {T}s of SIGKILL"
        started = time.monotonic()
        with pytest.raises(SupervisionError, match=r"owner of RDMABuffer .* is gone"):
            buf.read_into(dst, timeout=T).get(timeout=T + 5)
        with pytest.raises(SupervisionError):
            buf.write_from(dst[:10], timeout=T).get(timeout=T + 5)
        assert time.monotonic() - started < T  # failed on the death, not on the timeout
        fault_recorder.wait_for(1)


def test_reused_pid_detected_by_start_time() -> None:
    buf = RDMABuffer(memoryview(bytearray(16)))
    stale = RDMABuffer._from_handle(
        dataclasses.replace(buf._handle, start_time=buf._handle.start_time - 1))
    with pytest.raises(SupervisionError, match="has exited"):
        stale.read_into(memoryview(bytearray(16))).get(timeout=T)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_stalled_owner_tcp_times_out_but_process_vm_stays_one_sided(force_plane: Any) -> None:
    with owner_proc() as (_, owner, pid):
        buf = owner.make.call_one().get(timeout=T)
        dst = torch.empty(4096, dtype=torch.uint8)
        os.kill(pid, signal.SIGSTOP)
        try:
            # The kernel copies from a stopped process: no owner code runs for this plane.
            force_plane("process_vm")
            buf.read_into(dst, timeout=T).get(timeout=T)
            assert dst[:5].tolist() == [0, 1, 2, 3, 4]
            # The TCP plane needs the owner's listener thread: the timeout is honoured.
            force_plane("tcp")
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                buf.read_into(dst, timeout=1.0).get(timeout=T)
            assert time.monotonic() - started < 10
        finally:
            os.kill(pid, signal.SIGCONT)


def test_refused_process_vm_falls_back_to_shm(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fault double at the named point: the kernel refusing process_vm_* (EPERM).
    def refuse(*_: Any) -> None:
        raise vm.VmRefused(errno.EPERM, "refused for the test")

    monkeypatch.setattr(vm, "readv", refuse)
    monkeypatch.setattr(vm, "writev", refuse)
    monkeypatch.setattr(transfer, "_vm_refused", False)
    mem = bytearray(b"fallback" * 8)
    buf = RDMABuffer(memoryview(mem))
    assert buf._plane == "process_vm"
    out = bytearray(len(mem))
    buf.read_into(memoryview(out)).get(timeout=T)
    assert out == mem and buf._plane == "shm"
    buf.write_from(memoryview(b"FALL")).get(timeout=T)
    assert mem.startswith(b"FALLback")
