"""Worker processes a job started and may have to find again from another process."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time

from monarch._src.procstat import process_state

__all__ = [
    "alive",
    "child",
    "kill_workers",
    "listens",
    "remember",
    "spawn_detached",
    "wait_listening",
]

# Batch clients this process started, by pid: kept so that their Popen objects are not
# collected while the clients run (they may outlive this process by design).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


# Started by `spawn_detached`: starts its argv in a new session with output to a log file, prints
# the pid and exits, so the worker is not a child of the process that asked for it.
_LAUNCHER = (
    "import subprocess, sys\n"
    "with open(sys.argv[1], 'ab') as log:\n"
    "    p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,\n"
    "                         stderr=subprocess.STDOUT, start_new_session=True)\n"
    "print(p.pid)\n"
)


def spawn_detached(argv: list[str], log_path: str, env: dict[str, str]) -> int:
    """Start `argv` detached from this process (its own session, not our child); its pid.

    Job workers outlive the process that applied the job (`monarch apply` exits at once), so
    they must not be its children: no handle to keep, nothing for it to reap.
    """
    out = subprocess.run([sys.executable, "-c", _LAUNCHER, log_path, *argv], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                         check=False)
    if out.returncode != 0 or not out.stdout.strip().isdigit():
        raise RuntimeError(
            f"Could not start worker {argv!r} (status {out.returncode}): {out.stderr.strip()}"
        )
    return int(out.stdout.strip())


def remember(proc: subprocess.Popen[bytes]) -> None:
    """Keep `proc` (a batch client) until `kill_workers` reaps it or this process exits."""
    _CHILDREN[proc.pid] = proc


@atexit.register
def _poll_children() -> None:
    # A child that ended, or that the user reaped by its pid (`os.waitpid(job.batch_pid, 0)`),
    # gets its return code here, so its Popen does not warn "still running" when collected at
    # exit. One that still runs outlives this process by design, and that warning is true.
    for proc in _CHILDREN.values():
        proc.poll()


def child(pid: int) -> subprocess.Popen[bytes] | None:
    """The `Popen` of a process started here and `remember`ed (None if unknown)."""
    return _CHILDREN.get(pid)


def alive(pid: int, marker: str) -> bool:
    """Whether `pid` is alive (`ProcessState.alive`: neither a zombie nor dead) and its command
    line contains `marker` (guards against pid reuse)."""
    stat = process_state(pid)
    if stat is None or not stat.alive:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return marker in cmdline


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its parent (or init) reaps it


def kill_workers(workers: list[tuple[int, str]], timeout: float = 10.0) -> None:
    """SIGTERM each live `(pid, marker)` process group, SIGKILL what is left after `timeout`."""
    live = [(pid, m) for pid, m in workers if alive(pid, m)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in live:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass  # exited already: what the signal was for
        deadline = time.monotonic() + timeout
        while live and time.monotonic() < deadline:
            for pid, _ in live:
                _reap(pid)
            live = [(pid, m) for pid, m in live if alive(pid, m)]
            if live:
                time.sleep(0.05)
        if not live:
            break
    for pid, _ in workers:
        _reap(pid)


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.readlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds a listening TCP socket on `port` (Linux /proc)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def wait_listening(host: str, port: int, pid: int, marker: str, timeout: float) -> None:
    """Block until process `pid` listens on `port`; raises if it died or `timeout` passed.

    The socket must belong to `pid` itself: a free port picked by the job can be taken by
    another program before the worker binds it, and a plain connect would then succeed against
    the wrong process.
    """
    deadline = time.monotonic() + timeout
    while True:
        if listens(pid, port):
            return
        if not alive(pid, marker):
            raise RuntimeError(
                f"Worker process {pid} for {marker} exited before it listened. See its log."
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"Worker {marker} did not listen within {timeout:.0f}s.")
        time.sleep(0.05)
