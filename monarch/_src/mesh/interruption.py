"""The interruption rule: where a cancelled sync endpoint may have an exception raised in it.

A cancelled sync endpoint is interrupted (`cancellation.py`: an exception raised in its thread,
or `time.sleep` raising) only while every frame from the innermost one out to the endpoint is
the user's own code: never monarch's, the standard library's nor an installed library's
(site-packages). An exception raised in the middle of library code can leave it broken: a lock
of `threading`, `logging` or `queue` half taken, a child process of `subprocess` killed, the
import system or monarch's own state half updated. In the user's code it is as safe as a
Ctrl-C in a script. Monarch code that runs the user's code on its behalf (the `%%mesh` cell
runner) may be marked `interruptible`, and then counts as the user's.

Rejected: counting installed libraries as interruptible (as a first version did): their
frames hold locks and child processes as the standard library's do, and the user's code they
were called from gets the exception as soon as they return.
"""

from __future__ import annotations

import asyncio
import os
import sysconfig
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, TypeVar

__all__ = ["call_hiding_loop", "in_user_code", "interruptible", "is_user_code"]

F = TypeVar("F", bound=Callable[..., Any])

# Monarch functions whose frames count as the user's code.
_INTERRUPTIBLE: set[CodeType] = set()


def interruptible(fn: F) -> F:
    """Mark a monarch function that runs the user's code (the `%%mesh` cell runner) as a place
    where a cancelled sync endpoint may be interrupted, as in the user's own code; it must hold
    no lock and leave nothing half-done when an exception comes out of any line."""
    _INTERRUPTIBLE.add(fn.__code__)
    _user.pop(fn.__code__, None)  # an answer given before it was marked
    return fn


def call_hiding_loop(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a sync function on the actor's thread with no running loop visible (Monarch §2.2).
    Its frame is where `in_user_code` stops: the user's code is what it calls."""
    asyncio.events._set_running_loop(None)
    try:
        return fn(*args, **kwargs)
    finally:
        asyncio.events._set_running_loop(loop)


_MONARCH_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_paths = sysconfig.get_paths()
_STDLIB_DIRS = tuple({_paths["stdlib"] + os.sep, _paths["platstdlib"] + os.sep})
_LIBRARY_DIRS = tuple({_paths["purelib"] + os.sep, _paths["platlib"] + os.sep})
# Installed libraries of any environment (another venv on sys.path, a distribution's
# dist-packages) are found by the folder they are installed in.
_LIBRARY_PARTS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
_user: dict[CodeType, bool] = {}  # is_user_code's answers: code objects are few and long-lived


def is_user_code(code: CodeType) -> bool:
    """Whether `code` is the user's own code (a script, a notebook cell, the user's package
    outside site-packages), or a monarch function marked `interruptible`."""
    known = _user.get(code)
    if known is not None:
        return known
    name = code.co_filename
    if code in _INTERRUPTIBLE:
        user = True
    elif name.startswith("<frozen") or name.startswith(_MONARCH_DIR + os.sep):
        user = False
    elif name.startswith(_LIBRARY_DIRS) or any(part in name for part in _LIBRARY_PARTS):
        user = False
    else:
        user = not name.startswith(_STDLIB_DIRS)
    _user[code] = user
    return user


def in_user_code(frame: FrameType | None) -> bool:
    """Whether `frame` and every frame out from it to the endpoint (the caller of
    `call_hiding_loop`) are the user's code: the interruption rule. `call_hiding_loop`'s own
    frame is monarch's (an exception there could skip giving the loop back)."""
    seen_user = False
    while frame is not None:
        code = frame.f_code
        if code is call_hiding_loop.__code__:
            return seen_user  # reached the endpoint's caller
        if not is_user_code(code):
            return False
        seen_user = True
        frame = frame.f_back
    return False  # not in an endpoint at all
