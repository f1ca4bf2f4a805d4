"""Starting the local fork server (the zygote), possibly ahead of need.

The first use of this machine's host (`local_agent()`, behind `this_host()`) starts the zygote
before it starts the runtime, so the zygote imports the proc runtime while the controller starts
its mailbox, and the first `spawn_procs` mostly forks. Importing monarch starts no process: a
program that never spawns locally (it attaches to remote hosts, or only imports) has no fork
server. Never done inside monarch's own processes (they carry MONARCH_PROC=1: a proc's zygote
starts at its first spawn, a worker's when it serves), nor when MONARCH_PRESTART=0 (then at the
first `spawn_procs`). Stdlib only.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading

__all__ = ["PROC_MARKER", "prestart_zygote", "start_zygote", "take_prestarted"]

# The directory that holds the `monarch` package this process imported.
_MONARCH_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
PROC_MARKER = "MONARCH_PROC"  # set in the environment of the zygote and every proc

_lock = threading.Lock()
# A zygote started ahead of need, with the read end of its reply pipe, until an agent takes it.
_prestarted: tuple[subprocess.Popen[bytes], int] | None = None
_taken = False  # True once an agent took (or started) the zygote of this process


def start_zygote() -> tuple[subprocess.Popen[bytes], int]:
    """Start a zygote; returns it and the read end of its reply pipe. It is reaped as soon as it
    ends (`_reap_when_ended`)."""
    global _taken
    _taken = True
    reply_r, reply_w = os.pipe()
    try:
        zygote = subprocess.Popen(
            [sys.executable, "-m", "monarch._src.hosts.zygote", str(reply_w)],
            stdin=subprocess.PIPE,
            pass_fds=(reply_w,),
            # `-m` puts the working directory first on sys.path: started in the directory that
            # holds this monarch, the zygote imports this one, not a `monarch/` in the user's
            # working directory (each proc then restores the controller's directory).
            cwd=_MONARCH_ROOT,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                PROC_MARKER: "1",
            },
        )
    finally:
        os.close(reply_w)
    _reap_when_ended(zygote)
    return zygote, reply_r


def _reap_when_ended(zygote: subprocess.Popen[bytes]) -> None:
    """Reap `zygote` as soon as it ends, whatever ended it, from a thread of its own. Unreaped,
    it would stay a zombie child of this process until someone polls it: a Jupyter kernel that
    shuts down SIGTERMs its child processes and then waits until none is left, zombies
    included, so it would be killed by Jupyter after `shutdown_wait_time` / 2 (2.5 s) instead of
    exiting (benchmarks/kernel_restart.py)."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # (macOS) the zygote is reaped when polled, as before
        return

    def reap() -> None:
        try:
            # WNOWAIT leaves the reaping to `Popen`, which records the exit status: waiting
            # inside `Popen.wait()` instead would hold its lock, and `poll()` would answer None
            # (running) from other threads meanwhile.
            waitid(os.P_PID, zygote.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            return  # reaped already (`ZygoteClient.close`)
        zygote.poll()

    threading.Thread(target=reap, name="monarch-zygote-reaper", daemon=True).start()


def prestart_zygote() -> None:
    """Start the zygote now, unless this is a monarch proc or prestarting is switched off."""
    global _prestarted
    if os.environ.get(PROC_MARKER) or os.environ.get("MONARCH_PRESTART", "1") == "0":
        return
    with _lock:
        if _prestarted is None and not _taken:
            _prestarted = start_zygote()
            atexit.register(_close_prestarted)


def take_prestarted() -> tuple[subprocess.Popen[bytes], int] | None:
    """The prestarted zygote, if one is running; the caller owns it from now on."""
    global _prestarted, _taken
    with _lock:
        taken, _prestarted = _prestarted, None
        _taken = True
    if taken is not None and taken[0].poll() is not None:
        os.close(taken[1])
        return None
    return taken


def _close_prestarted() -> None:
    taken = take_prestarted()
    if taken is not None:
        zygote, reply_fd = taken
        if zygote.stdin is not None:
            zygote.stdin.close()
        zygote.wait()
        os.close(reply_fd)
