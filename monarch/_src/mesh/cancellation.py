"""Cancelling the calls of a hosted actor, and interrupting a cancelled sync endpoint.

A call its caller cancelled (`Future.cancel`, or an interrupt while the caller waited) is dropped
if it is still queued; if it is running, an async endpoint gets `asyncio.CancelledError` at its
next `await` (a `@concurrent_endpoint` body too: its task is cancelled), and a sync endpoint
sees `context().cancelled` (`check_cancelled()` raises `asyncio.CancelledError`); in monarch's
procs `time.sleep` called from the user's code is a cancellation point too
(`make_sleep_cancellable`). A sync endpoint that is still running `_CANCEL_GRACE` seconds later
is interrupted: `asyncio.CancelledError` is raised in its thread, but only where the
interruption rule allows (`interruption.py`: the user's own code, never monarch's, the standard
library's nor an installed library's); otherwise it is tried again every `_CANCEL_RETRY`
seconds until the endpoint returns. Code blocked in a C call (a socket read, `select`) is
interrupted when that call returns to the user's code; one blocked on another call's Future has
that call cancelled (`future.on_wait`). A cancelled call sends no reply (its caller stopped
listening) and the actor goes on with the next message; one that ran to its end anyway (it was
in library code all along) has its result dropped.

How the exception reaches the right frame (`interrupt_thread`). `PyThreadState_SetAsyncExc`
raises in the target thread at its next eval-breaker check, which comes where that thread stands
when it next runs Python code: where it gave up the GIL (a switch, or a C call that released it).
So the frame check and the delivery are made while the target cannot run (this thread holds the
GIL) and the target's position, its innermost frame and instruction, is read again after the
delivery: unchanged, the thread has not moved since it was checked and the exception is raised
in that frame (at its next instruction, or at the entry of a function it calls, before any of
that function runs); changed, the target ran in between (this thread lost the GIL), so the
exception is withdrawn and the interruption tried again later, unless the target took it in the
meantime: the exception raised is a `CancelledError` subclass that notes its arrival when it is
created (at the first handler it meets), and a noted arrival counts as the delivery, so a second
exception never lands in the user's cleanup code (a `finally` after the first).
Rejected: a trace function in the target thread (`sys.settrace` is per thread and can only be
set by that thread, and tracing every line of every sync endpoint in case it is cancelled costs
several times its run time); `sys.monitoring` (Python 3.12+) would allow it, and this module must
run on 3.10 and 3.11.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import enum
import logging
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, SupportsIndex

from monarch._src.mesh.context import current_hosted
from monarch._src.mesh.interruption import in_user_code
from monarch._src.runtime import future as _future
from monarch._src.runtime.envelope import Call

if TYPE_CHECKING:
    from monarch._src.runtime.actor_thread import ActorThread
    from monarch._src.runtime.mailbox import Mailbox

__all__ = [
    "CallCancellation", "CancelledError", "Delivery", "interrupt_thread", "make_sleep_cancellable",
]

logger = logging.getLogger(__name__)

# How long a cancelled sync endpoint may run on before it is interrupted, and how often an
# interruption that was not safe yet is tried again (seconds).
_CANCEL_GRACE = 0.5
_CANCEL_RETRY = 0.02

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
# Threads in which an interruption's `CancelledError` was raised since `interrupt_thread` last
# delivered to them.
_arrived: set[int] = set()


class CancelledError(asyncio.CancelledError):
    """The `asyncio.CancelledError` an interruption raises (named as its base, as the user's
    code sees and prints it). Creating it (which CPython does in
    the target thread when the exception reaches a handler: an `except`, a `finally`) notes that
    it arrived, so that a delivery the target consumed before `interrupt_thread` could check
    it is never followed by a second one (which would land in the user's cleanup code)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or ("the caller cancelled this call",)))
        _arrived.add(threading.get_ident())


class Delivery(enum.Enum):
    """What `interrupt_thread` did."""

    DELIVERED = "delivered"  # raised (or about to be) in a frame the rule allows
    NOT_NOW = "not now"  # the thread is in library code, or moved while checked: try again
    GONE = "gone"  # no such thread (it ended), or the exception could not be delivered


def interrupt_thread(ident: int) -> Delivery:
    """Raise `asyncio.CancelledError` in thread `ident` if it runs the user's code of an
    endpoint (the module's docstring says how the check and the delivery meet)."""
    frame = sys._current_frames().get(ident)
    if frame is None:
        return Delivery.GONE
    lasti = frame.f_lasti
    if not in_user_code(frame):
        return Delivery.NOT_NOW
    target = ctypes.c_ulong(ident)
    _arrived.discard(ident)
    delivered = _set_async_exc(target, ctypes.py_object(CancelledError))
    if delivered == 0:
        return Delivery.GONE  # the thread ended after its frames were read
    if delivered > 1:
        # Several thread states share the id (CPython's documentation: revert at once).
        _set_async_exc(target, None)
        logger.error("monarch: could not interrupt thread %d: %d threads have its id",
                     ident, delivered)
        return Delivery.GONE
    if sys._current_frames().get(ident) is not frame or frame.f_lasti != lasti:
        # It moved: this thread lost the GIL in between (the lines above are bytecode too). The
        # withdrawal is too late if the target already took the exception; `_arrived` tells,
        # here or before the next attempt (`CallCancellation._interrupt_sync`), and then the
        # interruption counts as delivered.
        _set_async_exc(target, None)
        return Delivery.DELIVERED if ident in _arrived else Delivery.NOT_NOW
    return Delivery.DELIVERED


class CallCancellation:
    """Which call a hosted actor runs, which calls their callers cancelled, and the
    interruption of a cancelled sync endpoint. `cancel` runs on the runtime loop; the rest on
    the actor's thread (calls are named by their reply port, unique per call)."""

    def __init__(self, mailbox: Mailbox, thread: ActorThread) -> None:
        self._mailbox = mailbox
        self._thread = thread
        self.running: Call | None = None  # the call being handled, not concurrent ones
        self.running_sync = False  # ... and it runs a sync endpoint (on the actor's thread)
        self.cancelled: set[Any] = set()  # reply ports of cancelled calls not yet ended
        self.concurrent: dict[Any, asyncio.Task[Any]] = {}  # reply port -> concurrent body
        self._lock = threading.Lock()  # orders an interruption with the call's end
        self._interrupted: Call | None = None  # the sync call interrupted (at most once)
        self.cancel_event = threading.Event()  # set while the running sync call is cancelled
        self.waiting_on: Any = None  # the Future the running sync endpoint blocks on

    def cancel(self, reply: Any) -> None:
        """The caller of the call replying to `reply` cancelled it (runtime loop): drop it if
        it is queued, interrupt it if it runs (the module's docstring says how)."""
        if any(isinstance(m, Call) and m.reply == reply for m in self._thread.queued()):
            self.cancelled.add(reply)  # `drop_queued` drops it when its turn comes
            return
        task = self.concurrent.get(reply)
        if task is not None:
            self.cancelled.add(reply)
            self._thread.loop.call_soon_threadsafe(task.cancel)
            return
        running = self.running
        if running is None or running.reply != reply:
            return  # it ended already
        self.cancelled.add(reply)
        if self.running_sync:
            with self._lock:
                if self.running is running:
                    self.cancel_event.set()  # wakes a `time.sleep` of the endpoint
                    waiting = self.waiting_on
                    if waiting is not None:
                        waiting.cancel()  # and cancels the call it waits for
            self._mailbox.loop.call_later(_CANCEL_GRACE, self._interrupt_sync, running)
        else:
            self._thread.loop.call_soon_threadsafe(self._cancel_awaited, running)

    def running_cancelled(self) -> bool:
        """Whether the caller of the call being handled cancelled it (`context().cancelled`)."""
        running = self.running
        return running is not None and running.reply in self.cancelled

    def drop_queued(self, reply: Any) -> bool:
        """Whether the call replying to `reply`, whose turn came, was cancelled while queued."""
        if self.cancelled and reply in self.cancelled:
            self.cancelled.discard(reply)
            return True
        return False

    def was_cancelled(self, reply: Any, exc: BaseException) -> bool:
        """Whether `exc` ends a call its caller cancelled (then nothing is sent back):
        `asyncio.CancelledError`, or the `concurrent.futures.CancelledError` of a call it
        waited for, which its cancellation cancelled."""
        if reply in self.cancelled:
            self.cancelled.discard(reply)
            return isinstance(exc, (asyncio.CancelledError, concurrent.futures.CancelledError))
        return False

    def ended(self, reply: Any) -> None:
        """A call ended with a result (a cancellation that came too late is forgotten)."""
        if self.cancelled:
            self.cancelled.discard(reply)

    def begin_sync(self, call: Call) -> None:
        _arrived.discard(threading.get_ident())  # an interruption of an earlier call
        with self._lock:
            self.running = call
            self.running_sync = True
            if self.cancel_event.is_set():
                self.cancel_event.clear()

    def end_sync(self, call: Call) -> None:
        """A sync endpoint returned (actor thread): no interruption may come after this."""
        with self._lock:
            self.running = None
            self.running_sync = False
            if self._interrupted is call:
                self._interrupted = None
                # Withdraw the exception if it was not raised yet (the endpoint returned first).
                _set_async_exc(ctypes.c_ulong(threading.get_ident()), None)

    def _cancel_awaited(self, call: Call) -> None:
        # On the actor's loop, which runs this only while `_main` waits: if it still awaits
        # this call's endpoint, cancelling `_main`'s task cancels what the endpoint awaits.
        task = self._thread.main_task
        if self.running is call and not self.running_sync and task is not None:
            task.cancel()

    def _interrupt_sync(self, call: Call) -> None:
        """Raise `CancelledError` in the actor's thread while it runs `call`'s sync endpoint,
        once, as soon as the interruption rule allows (runtime loop)."""
        ident = self._thread.thread.ident
        with self._lock:  # the endpoint cannot end (`end_sync`) while it is interrupted
            if self.running is not call or not self.running_sync or ident is None:
                return
            if ident in _arrived:  # an attempt that seemed withdrawn was taken after all
                self._interrupted = call
                return
            outcome = interrupt_thread(ident)
            if outcome is Delivery.DELIVERED:
                self._interrupted = call
            elif outcome is Delivery.NOT_NOW:
                self._mailbox.loop.call_later(_CANCEL_RETRY, self._interrupt_sync, call)


_blocking_sleep = time.sleep


def _sleep(seconds: float | SupportsIndex) -> None:
    """`time.sleep` in a monarch proc: as the original, except when the user's code of a sync
    endpoint whose call is cancelled calls it, where it returns at once by raising
    `asyncio.CancelledError`. Called from library code (`subprocess` polling its child, a
    library's retry loop), it sleeps as always: the interruption rule."""
    host = current_hosted()
    delay = float(seconds) if isinstance(seconds, (int, float)) else None
    if (host is None or not host.cancellation.running_sync or delay is None or not delay > 0
            or not in_user_code(sys._getframe(1))):
        _blocking_sleep(seconds)  # as time.sleep does (other types, NaN, < 0, 0)
        return
    if host.cancellation.cancel_event.wait(delay):
        raise asyncio.CancelledError("the caller cancelled this call")


def make_sleep_cancellable() -> None:
    """Make `time.sleep` a cancellation point of sync endpoints in this process (run in every
    proc by the proc wiring, not in the user's controller). Other threads, and code that took
    `sleep` from `time` before, sleep as always."""
    time.sleep = _sleep


def _note_wait(fut: Any) -> None:
    """`future.on_wait`: remember what a sync endpoint blocks on, so that cancelling its call
    cancels that too (a call to another actor, cancelled in turn there)."""
    host = current_hosted()
    if host is None or not host.cancellation.running_sync:
        return
    cancellation = host.cancellation
    cancellation.waiting_on = fut
    if fut is not None and cancellation.cancel_event.is_set():
        fut.cancel()  # cancelled before it began to wait


_future.on_wait.install(_note_wait)
