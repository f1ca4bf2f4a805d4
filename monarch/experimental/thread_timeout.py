"""`ThreadTimeout`: a wall-clock bound on synchronous Python code running on any thread.

`signal.alarm` only interrupts the main thread, and actor endpoints run on threads of their own.
`ThreadTimeout(seconds)` arms a watchdog thread; when the deadline passes first, the watchdog
asks CPython to raise `ThreadTimeoutError` in the guarded thread (`PyThreadState_SetAsyncExc`).
The exception arrives at the thread's next bytecode boundary, so a long native call (a sleep, a
C extension) is interrupted only once it returns to Python. Use `finally` or context managers
for cleanup, since the exception may land between any two bytecodes.

    with ThreadTimeout(5):
        crunch()            # raises ThreadTimeoutError after 5 s

Each instance guards one block (single use), blocks do not nest on one thread (CPython keeps one
pending asynchronous exception per thread), and the block must not span an `await`: the timer
targets the thread, not the coroutine.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from types import TracebackType

__all__ = ["ThreadTimeout", "ThreadTimeoutError"]


class ThreadTimeoutError(BaseException):
    """Raised in a thread whose `ThreadTimeout` block ran past its deadline.

    A `BaseException`, so `except Exception:` inside the guarded code does not swallow it.
    """


_active = threading.local()  # `.on` is True while this thread is inside a ThreadTimeout block


def _inject(thread_id: int, exc: type[BaseException] | None) -> int:
    """Schedule `exc` (None clears) in the thread; returns how many thread states changed."""
    fn = ctypes.pythonapi.PyThreadState_SetAsyncExc
    return int(fn(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None))


class ThreadTimeout:
    """Raise `ThreadTimeoutError` in the entering thread if the block outlives `seconds`."""

    def __init__(self, seconds: float) -> None:
        if sys.implementation.name != "cpython":
            raise RuntimeError("ThreadTimeout requires CPython")
        if seconds <= 0:
            raise ValueError(f"seconds must be positive, got {seconds!r}")
        self._seconds = seconds
        self._thread: int | None = None  # ident of the guarded thread, once entered
        self._done = threading.Event()  # set when the block ends
        self._lock = threading.Lock()  # orders "block ended" against "watchdog fired"
        self._fired = False

    def __enter__(self) -> ThreadTimeout:
        if self._thread is not None:
            raise RuntimeError("ThreadTimeout instances are single-use")
        if getattr(_active, "on", False):
            raise RuntimeError("ThreadTimeout contexts cannot be nested")
        self._thread = threading.get_ident()
        _active.on = True
        try:
            threading.Thread(target=self._watch, name=f"thread-timeout-{self._thread}",
                             daemon=True).start()
        except BaseException:
            _active.on = False
            raise
        return self

    def _watch(self) -> None:
        if self._done.wait(self._seconds):
            return
        with self._lock:
            if self._done.is_set():
                return
            assert self._thread is not None
            changed = _inject(self._thread, ThreadTimeoutError)
            if changed > 1:  # cannot happen for a live ident; undo rather than hit others
                _inject(self._thread, None)
            self._fired = changed == 1

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            with self._lock:
                self._done.set()
                fired = self._fired
            if fired and self._thread is not None:
                # The exception may still be pending (not yet delivered): drop it.
                _inject(self._thread, None)
        finally:
            _active.on = False
        if fired and exc_type is None:
            # The guarded code caught the timeout: the block still timed out.
            raise ThreadTimeoutError
