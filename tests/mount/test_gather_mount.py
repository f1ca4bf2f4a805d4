"""Gather mounts through real FUSE mounts and a two-host ProcessJob."""

from __future__ import annotations

import errno
import os
import signal
import time

import pytest

from monarch._src.job.process import ProcessJob
from monarch._src.mount.fs import is_mounted

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def faults_seen(monkeypatch):
    """Keep the client alive when the killed host's gather proc is reported (the default hook
    ends the client); the failures are collected instead."""
    import monarch.actor

    seen: list[object] = []
    monkeypatch.setattr(monarch.actor, "unhandled_fault_hook", seen.append)
    return seen


def test_job_gather_mount_live_files_dead_host_eio_and_unmount_on_kill(tmp_path, faults_seen):
    base, mnt = tmp_path / "hosts", tmp_path / "gathered"
    for i in range(2):
        (base / f"hosts_{i}").mkdir(parents=True)
        (base / f"hosts_{i}" / "train.log").write_text(f"step 0 host {i}\n")
    job = ProcessJob({"hosts": 2})
    job.gather_mount(str(base / "$SUBDIR"), str(mnt))
    try:
        job.state(cached_path=None)
        assert sorted(os.listdir(mnt)) == ["hosts_0", "hosts_1"]
        log0 = mnt / "hosts_0" / "train.log"
        with open(log0) as tail:  # a reader that stays open, as `tail -f` does
            assert tail.read() == "step 0 host 0\n"
            with open(base / "hosts_0" / "train.log", "a") as f:
                f.write("step 1 host 0\n")
            assert tail.read() == "step 1 host 0\n"  # no cache to wait out
        with pytest.raises(OSError) as info:
            (mnt / "hosts_0" / "new.txt").write_text("no")
        assert info.value.errno in (errno.EROFS, errno.EACCES)
        os.kill(job._host_to_pid["hosts_1"].pid, signal.SIGKILL)
        start = time.monotonic()
        # The host's gather proc outlives its worker for a moment (it ends on its parent's
        # death, asynchronously): a read may still be served until then; after, reads fail.
        error: OSError | None = None
        while error is None and time.monotonic() - start < 15:
            try:
                (mnt / "hosts_1" / "train.log").read_text()
            except OSError as exc:
                error = exc
            else:
                time.sleep(0.1)  # the kernel's view of a FUSE server: nothing to wait on
        assert error is not None and error.errno in (errno.EIO, errno.ENOENT), error
        assert time.monotonic() - start < 15  # bounded by the gather timeout
        assert log0.read_text().endswith("step 1 host 0\n")  # the live host still serves
        assert sorted(os.listdir(mnt)) == ["hosts_0", "hosts_1"]
    finally:
        job.kill()
    assert not is_mounted(str(mnt))
