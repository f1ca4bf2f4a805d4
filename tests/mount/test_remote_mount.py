"""Remote mounts through real FUSE mounts, real procs and real sockets."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from monarch._src.job.process import ProcessJob
from monarch._src.mount.fs import is_mounted
from monarch.actor import Actor, endpoint, this_host
from monarch.remotemount import remotemount

pytestmark = pytest.mark.timeout(120)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Reader(Actor):
    @endpoint
    def look(self, path: str) -> tuple[str, str]:
        with open(path) as f:
            return sys.prefix, f.read()


def _tiny_venv(where: str) -> None:
    """A venv (symlinked interpreter) that imports monarch from this checkout and its venv."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    site = os.path.join(where, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                        "site-packages")
    deps = [p for p in sys.path if p.endswith("site-packages")]
    with open(os.path.join(site, "monarch_checkout.pth"), "w") as f:
        f.write("\n".join([REPO, *deps]) + "\n")


def _wait_until(what, deadline_s: float = 30.0) -> None:
    """Wait for a condition of the kernel's (a mount going away), which no event announces."""
    end = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.05)


def test_job_remote_mount_serves_refreshes_runs_python_exe_and_unmounts_on_kill(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "conf.txt").write_text("lr=0.1")
    _tiny_venv(str(src / ".venv"))
    job = ProcessJob({"hosts": 1})
    job.remote_mount(str(src), mntpoint=str(mnt), cache_dir=str(tmp_path / "cache"))
    try:
        state = job.state(cached_path=None)
        assert is_mounted(str(mnt))
        reader = state.hosts.spawn_procs().spawn("reader", Reader)
        prefix, text = reader.look.call_one(str(mnt / "pkg" / "conf.txt")).get()
        assert text == "lr=0.1"
        assert prefix == str(mnt / ".venv")  # the procs run the mount's interpreter
        (src / "pkg" / "conf.txt").write_text("lr=0.2, epochs=3")
        (src / "new.txt").write_text("new")
        job.state(cached_path=None)  # a later state() refreshes the mount in place
        assert reader.look.call_one(str(mnt / "pkg" / "conf.txt")).get()[1] == "lr=0.2, epochs=3"
        assert reader.look.call_one(str(mnt / "new.txt")).get()[1] == "new"
    finally:
        job.kill()
    assert not is_mounted(str(mnt))


def test_remote_mount_reopen_moves_only_changed_files(tmp_path):
    src, mnt, cache = tmp_path / "src", tmp_path / "mnt", tmp_path / "cache"
    src.mkdir()
    big = os.urandom(9 * 1024 * 1024)  # three chunks
    (src / "big.bin").write_bytes(big)
    (src / "small.py").write_text("x = 1\n")
    mount = remotemount(this_host(), str(src), str(mnt), cache_dir=str(cache))
    mount.open()
    try:
        assert (mnt / "big.bin").read_bytes() == big
        assert (mnt / "small.py").read_text() == "x = 1\n"
        assert mount.stats()["fetched_bytes"] == len(big) + 6
        assert sorted(os.listdir(mnt)) == ["big.bin", "small.py"]
    finally:
        mount.close()
    assert not is_mounted(str(mnt))
    (src / "small.py").write_text("x = 22\n")
    mount.open()  # a second mount: the host's cache has every unchanged chunk
    try:
        assert (mnt / "big.bin").read_bytes() == big
        assert (mnt / "small.py").read_text() == "x = 22\n"
        assert mount.stats()["fetched_bytes"] == 7  # only the changed file moved
    finally:
        mount.close()


def test_remote_mount_file_changed_under_the_mount_reads_eio(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    (src / "f.txt").write_text("old")
    mount = remotemount(this_host(), str(src), str(mnt), cache_dir=str(tmp_path / "cache"))
    mount.open()
    try:
        (src / "f.txt").write_text("changed!")  # not refreshed: the mount's version is gone
        with pytest.raises(OSError) as info:
            (mnt / "f.txt").read_bytes()
        assert info.value.errno == errno.EIO
        mount.refresh()
        assert (mnt / "f.txt").read_text() == "changed!"
    finally:
        mount.close()


CONTROLLER = textwrap.dedent("""
    import sys
    from monarch._src.job.process import ProcessJob
    from monarch.remotemount import remotemount

    job = ProcessJob({"hosts": 1})
    state = job.state(cached_path=None)
    job.dump(sys.argv[3])
    mount = remotemount(state.hosts, sys.argv[1], sys.argv[2], cache_dir=sys.argv[4])
    mount.open()
    print("mounted", flush=True)
    sys.stdin.read()
""")


def test_controller_sigkill_fails_reads_with_eio_and_unmounts(tmp_path):
    from monarch._src.job.job import job_load

    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    (src / "small.txt").write_text("here")
    (src / "big.bin").write_bytes(os.urandom(5 * 1024 * 1024))
    job_file = tmp_path / "job.pkl"
    controller = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, str(src), str(mnt), str(job_file),
         str(tmp_path / "cache")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert controller.stdout is not None
        assert controller.stdout.readline().strip() == "mounted"
        assert (mnt / "small.txt").read_text() == "here"
        fd = os.open(mnt / "big.bin", os.O_RDONLY)  # open, nothing read yet
        try:
            controller.send_signal(signal.SIGKILL)
            controller.wait(timeout=30)
            start = time.monotonic()
            with pytest.raises(OSError) as info:
                os.pread(fd, 4096, 0)
            # EIO from the mount; ENOTCONN/ECONNABORTED from the kernel when the host agent
            # killed the mount's proc first (its owner is gone): an error either way, no hang.
            assert info.value.errno in (errno.EIO, errno.ENOTCONN, errno.ECONNABORTED)
            assert time.monotonic() - start < 35  # bounded: the fetch timeout at most
        finally:
            os.close(fd)
        _wait_until(lambda: not is_mounted(str(mnt)))
    finally:
        if controller.poll() is None:
            controller.kill()
        controller.wait(timeout=30)
        for pipe in (controller.stdin, controller.stdout):
            if pipe is not None:
                pipe.close()
        if job_file.exists():
            job_load(str(job_file)).kill()


def test_two_hosts_of_one_machine_share_one_mount_and_its_python_exe(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    (src / "f.txt").write_text("both")
    _tiny_venv(str(src / ".venv"))
    job = ProcessJob({"hosts": 2})
    job.remote_mount(str(src), mntpoint=str(mnt), cache_dir=str(tmp_path / "cache"))
    try:
        state = job.state(cached_path=None)
        readers = state.hosts.spawn_procs().spawn("reader", Reader)
        seen = readers.look.call(str(mnt / "f.txt")).get()
        assert [v for _, v in seen.items()] == [(str(mnt / ".venv"), "both")] * 2
    finally:
        job.kill()
    assert not is_mounted(str(mnt))
