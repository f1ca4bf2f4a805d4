"""The actor side of the distributed debugger: a pdb whose terminal is the debug controller.

`breakpoint()` on an actor's thread (routed here by `sys.breakpointhook`, see `agent.py`) and
post-mortem on an endpoint's exception both stop that thread under an `ActorPdb`. Its stdin and
stdout are a `_Channel`: each piece pdb writes is posted to the root client in `debug_output`
control messages (together with where pdb stopped), and each line pdb reads is a `debug_input`
message the controller sent back. Only the actor's own thread waits (pdb's trace function is per
thread): the proc's loop, its other actors and every other proc keep running.

A session belongs to one endpoint call: it is registered at the root (`debug_register`: actor
mesh name, rank, coordinates, host) at the call's first stop, and ends (`debug_end`) when the
call returns (the mesh calls `end_call` through the `endpoint_done` hook slot, which also switches
pdb off) or once post-mortem of its exception is over. `continue` resumes the actor within the
session: a later `breakpoint()`, or a breakpoint set with `b`, stops it again in the same
session, and an exception the call raises after a stop is debugged post-mortem there. A stop
outside any endpoint call (an actor's `__init__`) ends its session on `continue`.

A wait for input is bounded: after `debug_idle_timeout()` seconds without a line, or once the root
client is gone, the actor continues on its own, so a forgotten breakpoint cannot hold it forever.

Rejected: a socket from each paused actor straight to the `monarch debug` terminal. It would
need its own addressing and security; monarch messages already reach the client, under TLS too.
"""

from __future__ import annotations

import contextvars
import inspect
import itertools
import linecache
import os
import pdb  # noqa: T100 - the distributed debugger: ActorPdb is a pdb.Pdb
import queue
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from monarch._src.debug.control_ops import DebugEnd, DebugOutput, DebugRegister
from monarch._src.lowlevel import Runtime, control
from monarch._src.mesh.context import current_rank

__all__ = ["ActorPdb", "current_debugger", "debug_idle_timeout", "deliver_input", "end_call",
           "open_session", "post_mortem", "set_trace"]

_ids = itertools.count(1)
_inputs: dict[str, queue.SimpleQueue[str]] = {}  # session id -> lines from the controller
_inputs_lock = threading.Lock()
# Frames of these modules are never stopped in: stepping out of an endpoint resumes the actor
# instead of walking through monarch's dispatch code.
_SKIP = ("monarch._src.*", "asyncio.*", "concurrent.futures.*", "threading")
# The debugger of the endpoint call running in this context (an actor thread's sync call, or an
# async call's task); None outside a debugged call.
_call_debugger: contextvars.ContextVar[ActorPdb | None] = contextvars.ContextVar(
    "monarch_call_debugger", default=None)


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


def frame_position(frame: FrameType | None) -> tuple[str | None, int | None]:
    """("module.function", line) of `frame`, as the controller's `list` shows it."""
    if frame is None:
        return None, None
    code = frame.f_code
    module = inspect.getmodulename(code.co_filename) or code.co_filename
    return f"{module}.{code.co_name}", frame.f_lineno


class _Channel:
    """pdb's stdin and stdout for one session: output is posted, input is awaited."""

    def __init__(self, rt: Runtime, sid: str, root: str) -> None:
        self.rt = rt
        self.sid = sid
        self.root = root  # the root client's address
        self._pieces: list[str] = []  # what pdb wrote since the last post, one piece per write
        self.ended = False  # True once debug_end was posted
        # Where pdb is stopped now (set by the ActorPdb using this channel).
        self.position: Callable[[], tuple[str | None, int | None]] = lambda: (None, None)

    # -- stdout -----------------------------------------------------------------------------
    def write(self, text: str) -> int:
        if text:
            self._pieces.append(text)
        return len(text)

    def flush(self) -> None:
        """Kept buffered: pdb flushes after its prompt, and the prompt goes out with the
        request for input (`readline`), so the controller sees them together."""

    def post(self, waiting: bool = False) -> None:
        pieces, self._pieces = self._pieces, []
        if pieces or waiting:
            function, lineno = self.position()
            self.rt.mailbox.post(self.root, control(
                DebugOutput(self.sid, pieces, waiting, function, lineno)))

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
        self.rt.mailbox.post(self.root, control(DebugEnd(self.sid, reason)))
        with _inputs_lock:
            _inputs.pop(self.sid, None)


def _coords(actor: Any) -> tuple[int, dict[str, int]]:
    """The actor's rank and coordinates in its mesh (a call to a slice of the mesh does not
    change them: two actors never share a session)."""
    point = getattr(actor, "spawn_rank", None) or current_rank()
    return point.rank, {dim: point[dim] for dim in point}


def open_session(rt: Runtime, actor: Any, kind: str, where: str) -> _Channel:
    """Register a session for the hosted `actor` at the root client; its channel."""
    from monarch._src.mesh.controller import root_address

    info = actor.info
    sid = f"{rt.proc_id}/{info.actor_key}/{info.rank}/{next(_ids)}"
    with _inputs_lock:
        _inputs[sid] = queue.SimpleQueue()
    root = root_address(rt)
    rank, coords = _coords(actor)
    details = {
        "name": info.name,  # the actor mesh's spawn name
        "rank": rank,  # the actor's rank in its mesh
        "coords": coords,
        "hostname": socket.getfqdn(socket.gethostname()),
        "display": actor.display,
        "kind": kind,  # "breakpoint" or "post-mortem"
        "where": where,
        "address": rt.address,  # where debug_input goes
        "pid": os.getpid(),
    }
    rt.mailbox.post(root, control(DebugRegister(sid, details)))
    return _Channel(rt, sid, root)


def _in_endpoint_call(actor: Any) -> bool:
    """Whether `actor` is handling an endpoint call, whose end will end the session."""
    cancellation = getattr(actor, "cancellation", None)
    return cancellation is not None and (cancellation.running is not None
                                         or bool(cancellation.concurrent))


class ActorPdb(pdb.Pdb):
    """pdb on an actor's thread, talking to the debug controller through a `_Channel`.

    `continue` resumes the actor; `quit` also drops every breakpoint (quitting must not kill the
    actor: the endpoint goes on as if no debugger had stopped it). `clear` without arguments
    clears every breakpoint without asking (nobody could answer pdb's confirmation prompt).
    """

    def __init__(self, channel: _Channel, rt: Runtime, actor: Any, in_call: bool) -> None:
        super().__init__(stdin=channel, stdout=channel,  # type: ignore[arg-type]
                         skip=list(_SKIP), nosigint=True, readrc=False)
        self.use_rawinput = False
        self.channel = channel
        self.in_call = in_call  # the session ends with the endpoint call (else on continue)
        self._rt = rt
        self._actor = actor
        channel.position = self._position

    def _position(self) -> tuple[str | None, int | None]:
        return frame_position(getattr(self, "curframe", None))

    def _reopen(self, kind: str, where: str) -> None:
        """A stop after the session ended (a breakpoint set with `b` hit after the call ended):
        a new session."""
        self.channel = open_session(self._rt, self._actor, kind, where)
        self.channel.position = self._position
        self.stdin = self.stdout = self.channel  # type: ignore[assignment]

    def interaction(self, frame: FrameType | None, tb: TracebackType | None) -> None:
        if self.channel.ended:
            self._reopen("breakpoint", _where(frame))
        super().interaction(frame, tb)

    def get_stack(self, f: FrameType | None, t: TracebackType | None) -> Any:
        """pdb's stack without the frames of monarch's dispatch, asyncio and threading (so
        `where`, `up` and `down` move through the user's code only)."""
        stack, index = super().get_stack(f, t)
        current = stack[index] if stack else None
        kept = [entry for entry in stack if entry is current
                or not self.is_skipped_module(entry[0].f_globals.get("__name__", ""))]
        return kept, (kept.index(current) if current is not None else index)

    def lookupmodule(self, filename: str) -> str | None:
        """pdb's lookup, and for code whose file is not on this host (a function pickled by
        value from the client), its source from the root client (`source.fetch_source`)."""
        found = super().lookupmodule(filename)
        if found is None and not filename.endswith(".py"):
            found = super().lookupmodule(filename + ".py")
        if found is not None and not os.path.exists(found):
            from monarch._src.debug.source import ensure_source

            try:
                ensure_source(found)
            except Exception as exc:  # the client may be busy or gone: pdb still works
                self.error(f"could not fetch the source of {found} from the client: {exc}")
        return found

    def do_continue(self, arg: str) -> Any:
        """c(ont(inue)): resume the actor (the session ends with the endpoint call)."""
        result = super().do_continue(arg)
        if self.in_call:
            self.channel.post()
        else:
            self.channel.end("continued")
        return result

    do_c = do_cont = do_continue

    def do_quit(self, arg: str) -> Any:
        """q(uit) / exit: drop every breakpoint and resume the actor."""
        self.clear_all_breaks()
        return self.do_continue(arg)

    do_q = do_exit = do_quit

    def do_clear(self, arg: str) -> Any:
        """cl(ear) [bpnumber ...]: without arguments, clear every breakpoint (no prompt)."""
        if not arg:
            self.clear_all_breaks()
            return None
        return super().do_clear(arg)

    do_cl = do_clear

    def do_EOF(self, arg: str) -> Any:
        """End of input: same as continue."""
        return self.do_continue(arg)

    def finish(self, reason: str) -> None:
        """The endpoint call is over: no more stops, and the session ends."""
        self.clear_all_breaks()
        self.set_continue()
        sys.settrace(None)
        self.channel.end(reason)


def _where(frame: FrameType | None) -> str:
    if frame is None:
        return "?"
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"


def current_debugger() -> ActorPdb | None:
    """The debugger of the endpoint call running here, if it stopped."""
    return _call_debugger.get()


def _prepare_source(frame: FrameType | None) -> None:
    """Fetch the client's source for a frame whose file is not on this host."""
    if frame is None:
        return
    filename = frame.f_code.co_filename
    if filename.startswith("<") or os.path.exists(filename) or linecache.getlines(filename):
        return
    from monarch._src.debug.source import ensure_source

    try:
        ensure_source(filename)
    except Exception:  # noqa: BLE001 - without the source pdb still works, showing no lines
        return


def set_trace(rt: Runtime, actor: Any, frame: FrameType) -> None:
    """Stop the calling actor thread at `frame` under a remote pdb (`breakpoint()`)."""
    debugger = _call_debugger.get()
    if debugger is None or debugger.channel.ended:
        in_call = _in_endpoint_call(actor)
        channel = open_session(rt, actor, "breakpoint", _where(frame))
        debugger = ActorPdb(channel, rt, actor, in_call)
        if in_call:
            _call_debugger.set(debugger)
    _prepare_source(frame)
    debugger.set_trace(frame)


def post_mortem(rt: Runtime, actor: Any, method: str, exc: BaseException) -> None:
    """Inspect the frames of `exc`, raised by endpoint `method`, until the user continues; the
    session (the call's own, when it stopped before) ends then."""
    tb: TracebackType | None = exc.__traceback__
    if tb is None:
        return
    last = tb
    while last.tb_next is not None:
        last = last.tb_next
    where = f"{type(exc).__name__}: {exc} (in {method}, {_where(last.tb_frame)})"
    debugger = _call_debugger.get()
    if debugger is None or debugger.channel.ended:
        channel = open_session(rt, actor, "post-mortem", where)
        debugger = ActorPdb(channel, rt, actor, False)
    _call_debugger.set(None)
    _prepare_source(last.tb_frame)
    try:
        debugger.reset()
        debugger.channel.write(f"post-mortem of {type(exc).__name__}: {exc}\n")
        debugger.interaction(None, tb)
    finally:
        sys.settrace(None)
        debugger.channel.end("post-mortem done")


def end_call() -> None:
    """The endpoint call running here returned: end its debug session, if it had one."""
    debugger = _call_debugger.get()
    if debugger is not None:
        _call_debugger.set(None)
        debugger.finish("returned")
