"""Progress reports of long work against real procs, written to a captured terminal: procs
coming up while the client waits on them, large RDMA reads (chunk by chunk) and a workspace
sync; small transfers create no report at all."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monarch._src.lowlevel import TerminalRenderer, set_renderer_factory
from monarch.actor import Actor, endpoint, this_host
from monarch.config import configured

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning")]

T = 60.0


class Terminal(io.StringIO):
    """A captured stream that says it is a terminal; `written` is set on each write."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        n = super().write(text)
        self.written.set()
        return n


@pytest.fixture
def terminal() -> Iterator[tuple[Terminal, list[int]]]:
    """Every report created without a renderer writes to one captured terminal; the list
    counts the reports created."""
    out = Terminal()
    made: list[int] = []

    def factory() -> TerminalRenderer:
        made.append(1)
        return TerminalRenderer(out)

    previous = set_renderer_factory(factory)
    try:
        yield out, made
    finally:
        set_renderer_factory(previous)


def _gate(path: str) -> Any:
    """A bootstrap that returns once `path` exists (runs in each proc)."""

    def wait() -> None:
        while not os.path.exists(path):
            time.sleep(0.02)  # polling in the proc, not in the test

    return wait


def test_waiting_on_procs_coming_up_shows_them_after_the_delay(
    terminal: tuple[Terminal, list[int]], tmp_path: Path
) -> None:
    out, _ = terminal
    gate = tmp_path / "go"
    with configured(progress="auto"):
        procs = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=_gate(str(gate)))
        try:
            ready = procs.initialized
            assert out.written.wait(30)  # after the 0.5 s delay: the procs wait on the gate
            assert out.getvalue() == "\r[monarch] procs up: 0/2\x1b[K"
            gate.touch()
            assert ready.get(timeout=T) is True
            text = out.getvalue()
            assert text.endswith("s\x1b[K\n")
            assert "\r[monarch] procs up: 2/2 ready in " in text
            assert procs.initialized.get(timeout=T) is True  # up already: nothing more
            assert out.getvalue() == text
        finally:
            procs.stop().get(timeout=T)


class Owner(Actor):
    """Owns `n` bytes of value 7 and hands out an RDMA buffer over them."""

    @endpoint
    def make(self, n: int) -> Any:
        from monarch.rdma import RDMABuffer

        self.data = bytearray(b"\x07" * n)
        return RDMABuffer(memoryview(self.data))


def test_large_rdma_read_reports_each_chunk_and_small_ones_create_nothing(
    terminal: tuple[Terminal, list[int]]
) -> None:
    out, made = terminal
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        owner = procs.spawn("progress_owner", Owner)
        big = owner.make.call_one(64 << 20).get(timeout=T)
        with configured(progress="always"):
            small = owner.make.call_one(1024).get(timeout=T)
            into = bytearray(1024)
            small.read_into(memoryview(into)).get(timeout=T)
            assert made == [] and out.getvalue() == ""
            into = bytearray(64 << 20)
            with configured(rdma_max_chunk_size_mb=16):
                big.read_into(memoryview(into)).get(timeout=T)
        assert into[:4] == b"\x07" * 4 and into[-4:] == b"\x07" * 4
        lines = out.getvalue().split("\r")
        assert lines[1:6] == [f"[monarch] RDMA read: {done}/64.0 MiB\x1b[K"
                              for done in ("0 B", "16.0 MiB", "32.0 MiB", "48.0 MiB",
                                           "64.0 MiB")]
        assert lines[6].startswith("[monarch] RDMA read: 64.0 MiB/64.0 MiB done in ")
        assert lines[6].endswith("/s)\x1b[K\n")
    finally:
        procs.stop().get(timeout=T)


def test_workspace_sync_reports_the_bytes_sent(
    terminal: tuple[Terminal, list[int]], tmp_path: Path
) -> None:
    from monarch.job import sync_workspace

    out, _ = terminal
    src = tmp_path / "app"
    src.mkdir()
    (src / "model.bin").write_bytes(b"\x01" * (3 << 20))
    (src / "run.py").write_text("print('run')\n")
    with configured(progress="always"):
        sync_workspace(this_host(), str(src), str(tmp_path / "dest"))
    lines = out.getvalue().split("\r")
    assert lines[1] == "[monarch] workspace app: 0 B/3.0 MiB\x1b[K"
    assert lines[-1].startswith("[monarch] workspace app: 3.0 MiB/3.0 MiB synced to 1 host in ")
    assert (tmp_path / "dest" / "model.bin").stat().st_size == 3 << 20


def test_job_bring_up_reports_the_worker_hosts_starting(
    terminal: tuple[Terminal, list[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from monarch.job import ProcessJob

    out, _ = terminal
    monkeypatch.chdir(tmp_path)  # the job cache
    job = ProcessJob({"workers": 2})
    try:
        with configured(progress="always"):
            job.state()
    finally:
        job.kill()
    lines = out.getvalue().split("\r")
    assert lines[1:4] == [f"[monarch] starting worker hosts: {n}/2\x1b[K" for n in (0, 1, 2)]
    assert lines[4].startswith("[monarch] starting worker hosts: 2/2 worker hosts up (logs in ")
    assert lines[4].endswith("s\x1b[K\n")


def _refuse_at(path: str) -> Any:
    """A bootstrap that raises once `path` exists (runs in each proc)."""
    wait = _gate(path)

    def refuse() -> None:
        wait()
        raise RuntimeError("bootstrap refused on purpose")

    return refuse


def test_procs_failing_to_come_up_end_the_report_with_the_error_before_the_waiter_sees_it(
    terminal: tuple[Terminal, list[int]], fault_recorder: Any, tmp_path: Path
) -> None:
    out, _ = terminal
    gate = tmp_path / "go"
    with configured(progress="always"):
        procs = this_host().spawn_procs(per_host={"gpus": 2},
                                        bootstrap=_refuse_at(str(gate)))
        try:
            ready = procs.initialized  # shown at once under "always"
            gate.touch()
            with pytest.raises(Exception, match="bootstrap refused on purpose"):
                ready.get(timeout=T)
            text = out.getvalue()  # complete when the waiter woke: nothing is written later
            assert text.startswith("\r[monarch] procs up: 0/2\x1b[K")
            assert "procs up: 0/2 failed: " in text and text.endswith(" ...\x1b[K\n")
        finally:
            procs.stop().get(timeout=T)
