"""The mount daemon of an applied job: keeps its declared mounts up between `monarch` commands.

`monarch apply` exits as soon as the job is up, yet the job's gather mount must stay mounted on
this machine and its remote mounts served to the hosts (the source is read from the process that
mounted it). So the command line hands the mounts to a detached process of their own, one per
applied job (its apply id), that attaches to the job's hosts, opens the mounts and then answers
requests on a Unix socket, one line of JSON each way:

* `{"op": "refresh", "fingerprint": F}`: refresh the remote mounts (what a `state()` does) when
  the declarations are still F, else `{"stale": true}` and the caller replaces the daemon;
* `{"op": "stop"}`: unmount everything, answer, exit.

A host serves one client at a time, and the daemon is one: a process about to attach to the job
(`monarch exec`, `monarch shell`, a script's `job.state()`) stops the daemon first and mounts
for itself; the command line starts the daemon again as it exits (it attaches once the command
has let go of the hosts), so between commands the mounts are up. Its files (socket, pid, lock,
log) are under `<tmp>/monarch-mounts-<uid>/`, named by the apply id; a lock serializes the
processes that start, replace or stop it. A daemon killed outright leaves no dead
mount: each mount's reaper unmounts it. The alternative, keeping the mounts in the client, was
rejected for the command line: each command would mount and unmount again, and nothing would be
mounted between commands.

The daemon's entry point (`python -m monarch.tools.mount_daemon`) lives with the command line:
it is a controller, so it imports the controller's facade, which nothing here may.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from monarch._src.job.mounts import close_mounts_here, mount_specs, open_mounts_here
from monarch._src.job.pids import alive

__all__ = ["ensure", "fingerprint", "is_running", "serve", "start", "stop"]

logger = logging.getLogger(__name__)

# Bound on a daemon coming up: attaching to the hosts and opening every mount.
_START_TIMEOUT = 120.0
# Bound on one request (a refresh walks the remote mounts' sources; a stop unmounts).
_REQUEST_TIMEOUT = 300.0
# The module run as the daemon (`python -m`).
_ENTRY = "monarch.tools.mount_daemon"


def _base() -> str:
    base = os.path.join(tempfile.gettempdir(), f"monarch-mounts-{os.getuid()}")
    os.makedirs(base, mode=0o700, exist_ok=True)
    return base


def _path(job: Any, suffix: str) -> str:
    if job.apply_id is None:
        raise RuntimeError(f"{type(job).__name__} has mounts but was never applied; apply it "
                           "(job.apply() or `monarch apply`) before connecting.")
    return os.path.join(_base(), f"{job.apply_id}.{suffix}")


def fingerprint(job: Any) -> str:
    """A digest of the job's mount declarations (a daemon serves exactly one set)."""
    return hashlib.sha256(repr(mount_specs(job)).encode()).hexdigest()[:16]


def _ask(sock_path: str, request: dict[str, Any]) -> dict[str, Any] | None:
    """Send one request; None when no daemon listens at `sock_path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(_REQUEST_TIMEOUT)
        try:
            s.connect(sock_path)
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                return None  # it exited while answering (a stop races its exit)
            data += chunk
    reply: dict[str, Any] = json.loads(data)
    return reply


@contextlib.contextmanager
def _locked(job: Any) -> Iterator[None]:
    with open(_path(job, "lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _pid(job: Any) -> int | None:
    """The daemon's pid while it runs (a zombie or a reused pid of another program is not it:
    `pids.alive`)."""
    try:
        with open(_path(job, "pid")) as f:
            pid = int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if alive(pid, _ENTRY) else None


def is_running(job: Any) -> bool:
    """Whether the job has a mount daemon (up, or still attaching to the hosts)."""
    return job.apply_id is not None and _pid(job) is not None


def ensure(job: Any) -> None:
    """Make the job's daemon serve its current declarations, refreshed: ask the running one to
    refresh, replace one that serves other declarations (or is still starting), start one
    where none runs; returns once the mounts are up."""
    with _locked(job):
        reply = _ask(_path(job, "sock"), {"op": "refresh", "fingerprint": fingerprint(job)})
        if reply is not None and reply.get("ok"):
            return
        if reply is not None and "error" in reply:
            raise RuntimeError(f"The mount daemon of job {job.apply_id} could not refresh its "
                               f"mounts: {reply['error']}. Its log: {_path(job, 'log')}.")
        _stop_locked(job)
        _start_locked(job, wait=True)


def start(job: Any, wait: bool) -> None:
    """Start the job's daemon (stopping one that runs); with `wait`, return once its mounts are
    up, else at once (it attaches when the hosts are free: a host serves one client)."""
    with _locked(job):
        _stop_locked(job)
        _start_locked(job, wait)


def stop(job: Any) -> None:
    """Stop the job's daemon (its mounts unmounted first); nothing when it has none."""
    if not is_running(job):
        return
    with _locked(job):
        _stop_locked(job)


def _stop_locked(job: Any) -> None:
    sock = _path(job, "sock")
    _ask(sock, {"op": "stop"})  # a daemon that serves unmounts and exits before answering
    pid = _pid(job)
    if pid is not None:  # still attaching (no socket yet), or not answering
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # its mounts' reapers unmount what it had mounted
        deadline = time.monotonic() + _REQUEST_TIMEOUT
        while _pid(job) is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # not our child: no handle to wait on
    for suffix in ("sock", "pid"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(_path(job, suffix))


def _start_locked(job: Any, wait: bool) -> None:
    sock = _path(job, "sock")
    job_file = _path(job, "job")
    fd = os.open(job_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(job.dumps())
    log_path = _path(job, "log")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", _ENTRY, sock, job_file], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if wait else log, stderr=log, start_new_session=True,
            close_fds=True)
    with open(_path(job, "pid"), "w") as f:
        f.write(f"{proc.pid}\n")
    # It runs on, detached, past this process: marking it done keeps Popen from reporting a child
    # still running when collected (it is reaped by init once this process exits).
    proc.returncode = 0
    if not wait:
        return
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + _START_TIMEOUT
    try:
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                _stop_locked(job)
                raise TimeoutError(f"The mount daemon of job {job.apply_id} did not come up "
                                   f"within {_START_TIMEOUT:.0f}s. Its log: {log_path}.")
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    finally:
        proc.stdout.close()
    if line.strip() != b"ready":
        with open(log_path, errors="replace") as f:
            tail = f.read()[-2000:]
        raise RuntimeError(f"The mount daemon of job {job.apply_id} failed to open the job's "
                           f"mounts ({log_path}):\n{tail}")


def serve(sock: str, job_file: str) -> int:
    """The daemon: open the mounts of the job pickled in `job_file`, print "ready", then answer
    requests on `sock` until told to stop. Runs in a controller (the facade imported)."""
    from monarch._src.job.job import job_load

    job = job_load(job_file)
    os.remove(job_file)
    mine = fingerprint(job)
    state = job._state()
    open_mounts_here(job, state)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock)
    server.listen(8)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nobody reads the pipe any more
    logger.warning("mount daemon of job %s serving on %s", job.apply_id, sock)
    while True:
        conn, _ = server.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            try:
                request = json.loads(data)
            except ValueError:
                continue  # not one of ours: drop it
            if request.get("op") == "stop":
                close_mounts_here(job)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(sock)
                conn.sendall(b'{"ok": true}\n')
                return 0
            if request.get("fingerprint") != mine:
                conn.sendall(b'{"stale": true}\n')
                continue
            try:
                open_mounts_here(job, state)
                reply: dict[str, Any] = {"ok": True}
            except Exception as exc:  # noqa: BLE001 - reported to the caller, which raises
                logger.exception("refreshing the mounts failed")
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            conn.sendall(json.dumps(reply).encode() + b"\n")
