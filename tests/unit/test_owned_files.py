"""`owned_files.sweep` removes the files of processes that are gone, and only those."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from monarch._src.transport.owned_files import owned_name, process_start_time, sweep

pytestmark = pytest.mark.timeout(30)


def test_sweep_keeps_live_owners_and_removes_gone_reused_and_foreign(tmp_path: Path) -> None:
    mine = tmp_path / owned_name("x-", ".sock")
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=30)
    gone = tmp_path / f"x-{int(done.stdout)}-{12345}-ab.sock"  # that process was reaped
    me, start = os.getpid(), process_start_time(os.getpid())
    assert start is not None
    reused = tmp_path / f"x-{me}-{start - 1}-cd.sock"  # our pid, an earlier process
    other_kind = tmp_path / f"y-{int(done.stdout)}-1-ef.sock"
    unrelated = tmp_path / "x-notapid-1.sock"
    for path in (mine, gone, reused, other_kind, unrelated):
        path.write_text("")
    assert mine.name.startswith(f"x-{me}-{start}-")
    assert sweep(str(tmp_path), "x-", pids=[me]) == 1  # only `reused` is of that pid and stale
    assert not reused.exists() and gone.exists()
    assert sweep(str(tmp_path), "x-") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [mine.name, other_kind.name, unrelated.name])
    assert sweep(str(tmp_path / "missing"), "x-") == 0
