"""What one process says about its actors when the admin asks: the `introspect` control.

Every process answers `introspect` (registered with the `stacks` control by `stacks.install()`):
for each actor it hosts, its display name, whether it failed or stopped (and the report), how
many messages wait in its queue, and its calls in flight, each with its endpoint and since when
it runs; with `frames`, also the Python frames of each actor's thread (what `why.py` groups).
The answer is built on a short-lived thread, as stack dumps are, so a busy or blocked actor does
not hold it up.

The start of a call is not stamped by the mesh layer; a watcher thread here samples, twice a
second, the call each actor runs (`CallCancellation.running`, and its concurrent endpoint tasks)
and remembers when it first saw each one. Ages are thus exact to half a second, which is what
hang triage needs (a call stuck for minutes), and nothing is added to the call path. The watcher
starts with the process (its control operations are installed at start-up), so a call that
started before anyone asked still has its true age; it costs one look at the actor table per
sample. Rejected: a timestamp per call in the dispatcher (a cost on every call for a
tool used when something is already wrong).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Any

from monarch._src.admin.control_ops import Introspect
from monarch._src.lowlevel import (
    OncePort,
    Runtime,
    control,
    decode_reply,
    get_runtime,
)

__all__ = ["install_introspect", "introspect", "local_introspect"]

_SAMPLE_PERIOD = 0.5  # seconds between the watcher's looks at the running calls
_MAX_FRAMES = 40  # innermost frames of an actor thread kept in an answer


class _Watcher:
    """When each running call was first seen, and when each actor was first seen failed."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.lock = threading.Lock()
        # (actor key, id of the call or task) -> (method, first seen, epoch seconds); pruned to
        # what runs at the latest sample, so it holds at most one entry per running call.
        self.calls: dict[tuple[str, int], tuple[str, float]] = {}
        self.failed_at: dict[str, float] = {}  # actor key -> first seen failed or stopped
        self.thread: threading.Thread | None = None

    def ensure_running(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="monarch-admin-watch",
                                           daemon=True)
            self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # a racing actor table: the next sample retries
                pass
            time.sleep(_SAMPLE_PERIOD)

    def sample(self) -> None:
        now = time.time()
        seen: dict[tuple[str, int], tuple[str, float]] = {}
        with self.lock:
            for key, actor in list(self.rt.mailbox.actors.items()):
                for ident, method in _running(actor):
                    seen[(key, ident)] = self.calls.get((key, ident), (method, now))
                if _failure_text(actor) is not None:
                    self.failed_at.setdefault(key, now)
            self.calls = seen

    def in_flight(self, key: str) -> list[dict[str, Any]]:
        with self.lock:
            found = [(since, method) for (k, _i), (method, since) in self.calls.items()
                     if k == key]
        return [{"method": method, "since": since} for since, method in sorted(found)]


_watchers: dict[int, _Watcher] = {}  # id(runtime) -> its watcher


def _watcher(rt: Runtime) -> _Watcher:
    w = _watchers.get(id(rt))
    if w is None or w.rt is not rt:
        w = _watchers[id(rt)] = _Watcher(rt)
    return w


def _running(actor: Any) -> list[tuple[int, str]]:
    """(identity, method) of each call `actor` runs now: the one on its thread, then its
    concurrent endpoint tasks."""
    cancellation = getattr(actor, "cancellation", None)
    if cancellation is None:
        return []
    out: list[tuple[int, str]] = []
    running = cancellation.running
    if running is not None:
        out.append((id(running), str(running.method)))
    for task in list(cancellation.concurrent.values()):
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        method = frame.f_locals.get("method", "?") if frame is not None else "?"
        out.append((id(task), str(method)))
    return out


def _failure_text(actor: Any) -> str | None:
    """The failure (or stop) report of a failed or stopped actor; None while it lives."""
    failure = getattr(actor, "failure", None)
    if failure is None:
        failure = getattr(actor, "error", None)  # the tombstone of an actor that ended
    return None if failure is None else str(failure)


def _actor_threads(actor: Any) -> int | None:
    thread = getattr(actor, "thread", None)
    inner = getattr(thread, "thread", None)
    ident = getattr(inner, "ident", None)
    return ident if isinstance(ident, int) else None


def _frames(frame: Any) -> list[dict[str, Any]]:
    """The frames of a thread, outermost first, as file/line/function dicts."""
    summary = traceback.extract_stack(frame)[-_MAX_FRAMES:]
    return [{"file": f.filename, "line": f.lineno, "function": f.name, "code": f.line or ""}
            for f in summary]


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0  # not Linux: memory is not reported


def local_introspect(rt: Runtime | None = None, frames: bool = False) -> dict[str, Any]:
    """This process's answer (see the module docstring)."""
    rt = rt if rt is not None else get_runtime()
    watch = _watcher(rt)
    watch.sample()
    current = sys._current_frames() if frames else {}
    actors: list[dict[str, Any]] = []
    for key, actor in list(rt.mailbox.actors.items()):
        info = getattr(actor, "info", None)
        failure = _failure_text(actor)
        thread = getattr(actor, "thread", None)
        queued = thread.queued() if thread is not None and hasattr(thread, "queued") else []
        entry: dict[str, Any] = {
            "key": key,
            "name": getattr(info, "name", key),
            "rank": getattr(info, "rank", 0),
            "display": str(getattr(actor, "display", key)) if info is not None else key,
            "failure": failure,
            # A stop's error reads "actor X has status: stopped (reason)"; any other, a failure.
            "ended": None if failure is None else
            "stopped" if "has status: stopped" in failure else "failed",
            "failed_at": watch.failed_at.get(key) if failure is not None else None,
            "queue_depth": len(queued),
            "in_flight": watch.in_flight(key),
        }
        ident = _actor_threads(actor)
        if frames and ident is not None and ident in current:
            entry["frames"] = _frames(current[ident])
        actors.append(entry)
    return {"proc_id": rt.proc_id, "address": rt.address, "pid": os.getpid(),
            "rss_bytes": _rss_bytes(), "time": time.time(), "actors": actors}


def install_introspect(rt: Runtime) -> None:
    """Register the `introspect` control operation in `rt` and start its watcher."""

    def handle(peer: str, op: Introspect, reply: Any) -> None:
        frames = bool(op.frames)

        def answer() -> None:
            try:
                rt.mailbox.reply(reply, local_introspect(rt, frames))
            except Exception as exc:  # answer the asker rather than leave it waiting
                rt.mailbox.reply_error(reply, RuntimeError(f"introspection failed: {exc}"))

        threading.Thread(target=answer, name="monarch-introspect", daemon=True).start()

    rt.mailbox.control.register(Introspect, handle)
    _watcher(rt).ensure_running()


def introspect(address: str, *, frames: bool = False, timeout: float = 10.0) -> dict[str, Any]:
    """Ask the process at `address` (this one included) about its actors; `TimeoutError` after
    `timeout` seconds."""
    rt = get_runtime()
    if address == rt.address:
        return local_introspect(rt, frames)
    entry = OncePort()
    port = rt.mailbox.open_port(entry, (address,))
    rt.mailbox.post(address, control(Introspect(frames), port))
    try:
        reply = entry.cf.result(timeout=timeout)
    except TimeoutError:
        raise TimeoutError(f"The process at {address} did not answer an introspection request "
                           f"within {timeout:.0f} s.") from None
    result: dict[str, Any] = decode_reply(reply)
    return result
