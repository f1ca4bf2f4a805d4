"""The host agent's end of its fork server (`zygote.py`): requests out, the child watch in.

`ZygoteClient` starts the zygote on first use (or takes the one `prestart.py` started ahead of
need), or a new one if the last one died; sends it `spawn`, `preload` and `kill` requests; and
runs the child watch, a thread that follows the zygote's replies and reports each spawned proc's
pid (`on_spawned`) and each child's exit (`on_exit`), including the children a dead zygote took
with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from monarch._src.hosts.prestart import start_zygote, take_prestarted
from monarch._src.hosts.zygote import read_message, write_message

__all__ = ["PRELOADABLE", "ZygoteClient"]

# Heavy modules the zygote imports before forking once the controller has imported them: every
# proc then starts with them loaded (torch alone costs about 2 s of CPU per process).
PRELOADABLE = ("numpy", "torch")


class ZygoteClient:
    """One agent's fork server. Methods run on any thread; requests are sent under a lock."""

    def __init__(self, on_spawned: Callable[[str, int], None],
                 on_exit: Callable[[int, str], None]) -> None:
        self.on_spawned = on_spawned  # (proc id, pid), from the child watch thread
        self.on_exit = on_exit  # (pid, exit status), from the child watch thread
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None  # started on first use
        self._preloaded: set[str] = set()  # modules the current zygote was asked to import

    @property
    def started(self) -> bool:
        """Whether a zygote was ever started (or taken) by this client."""
        return self._zygote is not None

    def start(self) -> None:
        """Start the fork server now, or a new one if the last one died."""
        with self._lock:
            self._ensure()

    def spawn(self, specs: list[dict[str, Any]], preload: tuple[str, ...] | None = None) -> None:
        """Fork one proc per spec; first, the zygote imports those of `preload` (default
        `PRELOADABLE`) that this process has imported and it has not yet, under this process's
        environment of now: what those modules read when they load (`OMP_NUM_THREADS`,
        `TORCH_CPP_LOG_LEVEL`, ...) is what the controller had set by this spawn. A variable
        changed after they were preloaded reaches the procs' `os.environ`, not those modules."""
        with self._lock:
            self._ensure()
            wanted = [m for m in (PRELOADABLE if preload is None else preload)
                      if m in sys.modules and m not in self._preloaded]
            if wanted:
                self._preloaded.update(wanted)
                self._send({"preload": wanted, "environ": dict(os.environ)})
            self._send({"spawn": specs})

    def kill(self, pids: list[int], sig: int = 9) -> None:
        """Signal children of the live zygote (none if it is gone: they died with it)."""
        with self._lock:
            if self._zygote is not None and self._zygote.poll() is None:
                self._send({"kill": pids, "sig": sig})

    def close(self, timeout: float) -> None:
        """Close the zygote's stdin (it kills its children and exits); wait up to `timeout`, then
        kill it."""
        with self._lock:
            zygote = self._zygote
        if zygote is None:
            return
        if zygote.stdin is not None:
            zygote.stdin.close()
        try:
            zygote.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            zygote.kill()

    def _ensure(self) -> None:
        """(lock held)"""
        if self._zygote is not None and self._zygote.poll() is None:
            return
        zygote, reply_fd = take_prestarted() or start_zygote()
        self._zygote = zygote
        self._preloaded = set()
        threading.Thread(
            target=self._watch, args=(reply_fd,), name="monarch-host-agent", daemon=True,
        ).start()

    def _send(self, msg: dict[str, Any]) -> None:
        """(lock held)"""
        assert self._zygote is not None and self._zygote.stdin is not None
        write_message(self._zygote.stdin.fileno(), msg)

    def _watch(self, reply_fd: int) -> None:
        """The child watch: follows one zygote's replies until it is gone."""
        children: set[int] = set()  # this zygote's children that have not exited
        while True:
            try:
                msg = read_message(reply_fd)
            except OSError:
                msg = None
            if msg is None:
                break
            if "spawned" in msg:
                for proc_id, pid in msg["spawned"]:
                    children.add(pid)
                    self.on_spawned(proc_id, pid)
            elif "exit" in msg:
                children.discard(msg["exit"])
                self.on_exit(msg["exit"], msg["status"])
        # The zygote is gone (killed, or closed at exit): its children died with it (they ask
        # the kernel to kill them when it dies); report each, so nobody waits for them.
        try:
            os.close(reply_fd)
        except OSError:
            pass  # closed already by the reader that saw the zygote go
        for pid in children:
            self.on_exit(pid, "Killed (its fork server exited)")
