"""The actor side of the distributed debugger: a pdb whose terminal is the debug controller.

`breakpoint()` on an actor's thread (routed here by `sys.breakpointhook`, see `agent.py`) and
post-mortem on an endpoint's exception both start an `ActorPdb` on that thread. Its stdin and
stdout are a `_Channel`: what pdb writes is posted to the root client as `debug_output` control
messages, and each line pdb reads is a `debug_input` message the controller sent back. Only the
actor's own thread waits (pdb's trace function is per thread): the proc's loop, its other actors
and every other proc keep running.

The session is registered at the root as `debug_register` (actor name, rank, where it stopped)
and ends with `debug_end` when the user continues (`c`, `q`, `detach`). A wait for input is
bounded: after `debug_idle_timeout()` seconds without a line, or once the root client is gone,
the actor continues on its own, so a forgotten breakpoint cannot hold an actor forever.

Rejected: a socket from each paused actor straight to the `monarch debug` terminal. It would
need its own addressing and security; monarch messages already reach the client, under TLS too.
"""

from __future__ import annotations

import itertools
import os
import pdb  # noqa: T100 - the distributed debugger: ActorPdb is a pdb.Pdb
import queue
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

from monarch._src.lowlevel import CONTROL, Control, Runtime

__all__ = ["ActorPdb", "debug_idle_timeout", "deliver_input", "open_session"]

_ids = itertools.count(1)
_inputs: dict[str, queue.SimpleQueue[str]] = {}  # session id -> lines from the controller
_inputs_lock = threading.Lock()
# Frames of these modules are never stopped in: stepping out of an endpoint resumes the actor
# instead of walking through monarch's dispatch code.
_SKIP = ("monarch._src.*", "asyncio.*", "concurrent.futures.*", "threading")


def debug_idle_timeout() -> float:
    """Seconds a paused actor waits for a debugger command before continuing on its own."""
    raw = os.environ.get("MONARCH_DEBUG_IDLE_TIMEOUT", "1800")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"MONARCH_DEBUG_IDLE_TIMEOUT must be a number of seconds, got {raw!r}."
        ) from None
    return value if value > 0 else 1800.0


def deliver_input(sid: str, line: str) -> None:
    """A line for session `sid` arrived from the controller (runtime loop)."""
    with _inputs_lock:
        q = _inputs.get(sid)
    if q is not None:
        q.put(line)


class _Channel:
    """pdb's stdin and stdout for one session: output is posted, input is awaited."""

    def __init__(self, rt: Runtime, sid: str, root: str) -> None:
        self.rt = rt
        self.sid = sid
        self.root = root  # the root client's address
        self._buffer: list[str] = []  # output written since the last post
        self.ended = False  # True once debug_end was posted

    # -- stdout -----------------------------------------------------------------------------
    def write(self, text: str) -> int:
        self._buffer.append(text)
        return len(text)

    def flush(self) -> None:
        """Kept buffered: pdb flushes after its prompt, and the prompt goes out with the
        request for input (`readline`), so the controller sees them together."""

    def post(self, waiting: bool = False) -> None:
        text = "".join(self._buffer)
        self._buffer.clear()
        if text or waiting:
            self.rt.mailbox.post(
                self.root, Control(CONTROL, "debug_output", (self.sid, text, waiting), None))

    # -- stdin ------------------------------------------------------------------------------
    def readline(self) -> str:
        """The next command; pdb's prompt was just written, so the controller is told it waits."""
        self.post(waiting=True)
        with _inputs_lock:
            q = _inputs[self.sid]
        deadline = debug_idle_timeout()
        waited = 0.0
        while waited < deadline:
            try:
                return q.get(timeout=1.0) + "\n"
            except queue.Empty:
                waited += 1.0
                if self.rt.mailbox.is_dead(self.root):
                    break
        # Nobody answered: resume the actor rather than hold it forever.
        self.write(f"\n*** no debugger command for {deadline:.0f} s; continuing\n")
        return "continue\n"

    def end(self, reason: str) -> None:
        if self.ended:
            return
        self.ended = True
        self.post()
        self.rt.mailbox.post(self.root, Control(CONTROL, "debug_end", (self.sid, reason), None))
        with _inputs_lock:
            _inputs.pop(self.sid, None)


def open_session(rt: Runtime, actor: Any, kind: str, where: str) -> _Channel:
    """Register a session for the hosted `actor` at the root client; its channel."""
    from monarch._src.mesh.controller import root_address

    info = actor.info
    sid = f"{rt.proc_id}/{info.actor_key}/{info.rank}/{next(_ids)}"
    with _inputs_lock:
        _inputs[sid] = queue.SimpleQueue()
    root = root_address(rt)
    details = {
        "name": info.name,  # the actor mesh's spawn name
        "rank": info.rank,
        "display": actor.display,
        "kind": kind,  # "breakpoint" or "post-mortem"
        "where": where,
        "address": rt.address,  # where debug_input goes
        "pid": os.getpid(),
    }
    rt.mailbox.post(root, Control(CONTROL, "debug_register", (sid, details), None))
    return _Channel(rt, sid, root)


class ActorPdb(pdb.Pdb):
    """pdb on an actor's thread, talking to the debug controller through a `_Channel`.

    `continue`, `quit` and `detach` all resume the actor and end the session (quitting must not
    kill the actor: the endpoint goes on as if no debugger had stopped it).
    """

    def __init__(self, channel: _Channel, rt: Runtime, actor: Any) -> None:
        super().__init__(stdin=channel, stdout=channel,  # type: ignore[arg-type]
                         skip=list(_SKIP), nosigint=True, readrc=False)
        self.use_rawinput = False
        self.channel = channel
        self._rt = rt
        self._actor = actor

    def interaction(self, frame: FrameType | None, tb: TracebackType | None) -> None:
        """Stop here; a stop after the session ended (a breakpoint set with `b`, or `step`
        after the endpoint returned) opens a new session."""
        if self.channel.ended:
            self.channel = open_session(self._rt, self._actor, "breakpoint", _where(frame))
            self.stdin = self.stdout = self.channel  # type: ignore[assignment]
        super().interaction(frame, tb)

    def get_stack(self, f: FrameType | None, t: TracebackType | None) -> Any:
        """pdb's stack without the frames of monarch's dispatch, asyncio and threading (so
        `where`, `up` and `down` move through the user's code only)."""
        stack, index = super().get_stack(f, t)
        current = stack[index] if stack else None
        kept = [entry for entry in stack if entry is current
                or not self.is_skipped_module(entry[0].f_globals.get("__name__", ""))]
        return kept, (kept.index(current) if current is not None else index)

    def do_continue(self, arg: str) -> Any:
        """c(ont(inue)): resume the actor and end this debug session."""
        result = super().do_continue(arg)
        self.channel.end("continued")
        return result

    do_c = do_cont = do_continue

    def do_quit(self, arg: str) -> Any:
        """q(uit) / exit / detach: drop every breakpoint, resume the actor, end the session."""
        self.clear_all_breaks()
        return self.do_continue(arg)

    do_q = do_exit = do_detach = do_quit

    def do_EOF(self, arg: str) -> Any:
        """End of input: same as continue."""
        return self.do_continue(arg)


def _where(frame: FrameType | None) -> str:
    if frame is None:
        return "?"
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"


def set_trace(rt: Runtime, actor: Any, frame: FrameType) -> None:
    """Stop the calling actor thread at `frame` under a remote pdb (`breakpoint()`)."""
    channel = open_session(rt, actor, "breakpoint", _where(frame))
    ActorPdb(channel, rt, actor).set_trace(frame)


def post_mortem(rt: Runtime, actor: Any, method: str, exc: BaseException) -> None:
    """Inspect the frames of `exc`, raised by endpoint `method`, until the user continues."""
    tb: TracebackType | None = exc.__traceback__
    if tb is None:
        return
    last = tb
    while last.tb_next is not None:
        last = last.tb_next
    where = f"{type(exc).__name__}: {exc} (in {method}, {_where(last.tb_frame)})"
    channel = open_session(rt, actor, "post-mortem", where)
    debugger = ActorPdb(channel, rt, actor)
    try:
        debugger.reset()
        channel.write(f"post-mortem of {type(exc).__name__}: {exc}\n")
        debugger.interaction(None, tb)
    finally:
        sys.settrace(None)
        channel.end("continued")
