"""The debug controller: the root client's registry of paused actors, and attaching to them.

Paused actors (a `breakpoint()` in an endpoint, or post-mortem on an endpoint's exception) report
to the root client's `DebugController`, keyed by actor mesh name and rank. From there a user:

* in the same process (a notebook cell, a script): `debug_controller().attach()` runs a pdb
  prompt through `input()` (in Jupyter, the kernel's stdin shows it in the cell), or feeds a
  scripted list of commands (`attach(commands=[...])`) and returns the transcript;
* from another terminal: `monarch debug` connects to the controller's server (see
  `monarch._src.admin.server`), lists the paused actors and attaches to one.

The first session to register starts that server and prints where to attach. Every wait here is
bounded; a session nobody attaches to resumes by itself after `MONARCH_DEBUG_IDLE_TIMEOUT`.
"""

from __future__ import annotations

import builtins
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from monarch._src.admin.model import set_paused_source
from monarch._src.debug.agent import POST_MORTEM_ENV, set_local_post_mortem
from monarch._src.lowlevel import CONTROL, Control, get_runtime

__all__ = ["DebugController", "DebugSession", "debug_controller", "debug_controller_here"]

_lock = threading.Lock()
_controller: DebugController | None = None


@dataclass(frozen=True)
class SessionInfo:
    """What `DebugController.sessions()` lists about one paused actor."""

    name: str  # the actor mesh's spawn name
    rank: int  # the actor's rank in that mesh
    display: str  # the actor's display name
    kind: str  # "breakpoint" or "post-mortem"
    where: str  # file:line in function, or the exception for post-mortem
    pid: int  # the paused actor's process

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.name, "rank": self.rank, "display": self.display,
                "kind": self.kind, "where": self.where, "pid": self.pid}


class DebugSession:
    """One paused actor as the controller sees it: its output so far, and a way to answer.

    `read()` and `send()` may be called from any thread; one attachment at a time (`claim`).
    """

    def __init__(self, sid: str, details: dict[str, Any]) -> None:
        self.sid = sid
        self.info = SessionInfo(details["name"], int(details["rank"]), details["display"],
                                details["kind"], details["where"], int(details["pid"]))
        self.address: str = details["address"]  # the paused actor's process
        self._chunks: queue.SimpleQueue[tuple[str, bool] | None] = queue.SimpleQueue()
        self.waiting = False  # the actor is blocked on its next command
        self.last_prompt = ""  # the output chunk that ended with the current prompt
        self.ended = threading.Event()  # set once the actor resumed
        self.claim = threading.Lock()  # held by whoever is attached

    def _output(self, text: str, waiting: bool) -> None:
        self.waiting = waiting
        if waiting:
            self.last_prompt = text
        self._chunks.put((text, waiting))

    def _end(self) -> None:
        self.waiting = False
        self.ended.set()
        self._chunks.put(None)

    def reshow_prompt(self) -> None:
        """Queue the pending prompt again for a debugger that attaches now, if the actor waits
        for a command and nothing unread is queued (the previous attachment read the prompt)."""
        if self.waiting and self._chunks.empty():
            self._output(self.last_prompt, True)

    def read(self, timeout: float) -> tuple[str, bool] | None:
        """The next output chunk and whether the actor now waits for a command; None once the
        session ended. Raises `TimeoutError` if nothing came within `timeout` seconds."""
        try:
            item = self._chunks.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(
                f"The paused actor {self.info.display} sent nothing for {timeout:.0f} s."
            ) from None
        if item is None:
            self._chunks.put(None)  # later reads see the end too
        return item

    def send(self, line: str) -> None:
        """Send one debugger command to the paused actor."""
        if self.ended.is_set():
            raise RuntimeError(f"The debug session of {self.info.display} has ended; the actor "
                               "is running again.")
        self.waiting = False
        get_runtime().mailbox.post(
            self.address, Control(CONTROL, "debug_input", (self.sid, line), None))


class DebugController:
    """The registry of paused actors in the root client. Get it with `debug_controller()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, DebugSession] = {}  # sid -> live session
        self._changed = threading.Condition(self._lock)  # notified when a session comes or goes
        self.post_mortem = os.environ.get(POST_MORTEM_ENV) == "1"
        self.server: Any = None  # the ControlServer, once started
        self.announce = True  # print a line to stderr when an actor pauses

    # ---- sessions (runtime loop side) ---------------------------------------------------------
    def _register(self, sid: str, details: dict[str, Any]) -> None:
        session = DebugSession(sid, details)
        with self._changed:
            self._sessions[sid] = session
            self._changed.notify_all()
        where = self.ensure_server()
        if self.announce:
            sys.stderr.write(
                f"monarch: actor {session.info.name} rank {session.info.rank} paused "
                f"({session.info.kind}: {session.info.where}); attach with `monarch debug "
                f"--host {where[0]} --port {where[1]}` or debug_controller().attach()\n"
            )

    def _output(self, sid: str, text: str, waiting: bool) -> None:
        session = self._sessions.get(sid)
        if session is not None:
            session._output(text, waiting)

    def _end(self, sid: str, reason: str) -> None:
        with self._changed:
            session = self._sessions.pop(sid, None)
            self._changed.notify_all()
        if session is not None:
            session._end()

    def _peer_lost(self, address: str, err: BaseException) -> None:
        """A process died: its paused actors' sessions end (runtime loop)."""
        with self._lock:
            gone = [sid for sid, s in self._sessions.items() if s.address == address]
        for sid in gone:
            self._output(sid, f"\n*** the actor's process is gone: {err}\n", False)
            self._end(sid, "process lost")

    # ---- queries ------------------------------------------------------------------------------
    def sessions(self) -> list[SessionInfo]:
        """The paused actors, ordered by mesh name and rank."""
        with self._lock:
            infos = [s.info for s in self._sessions.values()]
        return sorted(infos, key=lambda i: (i.name, i.rank))

    def paused(self) -> list[tuple[str, int]]:
        """(actor mesh name, rank) of each paused actor: what the admin view shows as paused."""
        return [(i.name, i.rank) for i in self.sessions()]

    def session(self, name: str | None = None, rank: int | None = None,
                timeout: float = 0.0) -> DebugSession:
        """The session of actor `name` at `rank` (either may be None: any), waiting up to
        `timeout` seconds for one to appear."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for s in sorted(self._sessions.values(), key=lambda s: (s.info.name, s.info.rank)):
                    if name in (None, s.info.name) and rank in (None, s.info.rank):
                        return s
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            paused = ", ".join(f"{i.name}[{i.rank}]" for i in
                               sorted((s.info for s in self._sessions.values()),
                                      key=lambda i: (i.name, i.rank))) or "none"
        what = "any actor" if name is None else f"actor {name}" + (
            "" if rank is None else f" rank {rank}")
        raise LookupError(f"No paused session for {what} (paused: {paused}). Call an endpoint "
                          "that reaches breakpoint() first, or pass timeout= to wait for one.")

    # ---- attaching ----------------------------------------------------------------------------
    def attach(
        self,
        name: str | None = None,
        rank: int | None = None,
        *,
        commands: Iterable[str] | None = None,
        timeout: float = 60.0,
        input: Callable[[str], str] | None = None,
        output: TextIO | None = None,
    ) -> str:
        """Debug a paused actor until it resumes; returns the session's transcript.

        Waits up to `timeout` seconds for a matching session (the first one if `name` is None);
        once attached, it follows the actor as long as it runs (a command like `next` may take
        a while) and returns when it resumes or its process dies.
        Commands come from `commands` (then `continue` when they run out, so a script never
        blocks) or else from `input(prompt)` (`builtins.input`: in Jupyter, a prompt in the
        cell). pdb's output is written to `output` (default `sys.stdout`) as it arrives.
        """
        session = self.session(name, rank, timeout=timeout)
        out = output if output is not None else sys.stdout
        scripted = iter(commands) if commands is not None else None
        ask = input if input is not None else builtins.input
        transcript: list[str] = []
        if not session.claim.acquire(timeout=timeout):
            raise RuntimeError(f"Another debugger is attached to {session.info.display}.")
        try:
            header = f"--- attached to {session.info.display} ({session.info.kind}) ---\n"
            out.write(header)
            transcript.append(header)
            session.reshow_prompt()
            while True:
                try:
                    item = session.read(timeout=5.0)
                except TimeoutError:
                    # The actor is running a command (`next` over a long call): wait on; a
                    # session whose process died is ended by `_peer_lost`.
                    continue
                if item is None:
                    break
                text, waiting = item
                if not waiting:
                    out.write(text)
                    transcript.append(text)
                    continue
                body, prompt = _split_prompt(text)
                out.write(body)
                transcript.append(body)
                if scripted is not None:
                    line = next(scripted, "continue")
                    out.write(f"{prompt}{line}\n")
                    transcript.append(f"{prompt}{line}\n")
                else:
                    out.flush()
                    try:
                        line = ask(prompt)
                    except EOFError:
                        line = "continue"
                    transcript.append(f"{prompt}{line}\n")
                session.send(line)
            footer = f"--- {session.info.display} resumed ---\n"
            out.write(footer)
            transcript.append(footer)
            out.flush()
        finally:
            session.claim.release()
        return "".join(transcript)

    # ---- post-mortem and the server -----------------------------------------------------------
    def set_post_mortem(self, enabled: bool = True) -> None:
        """Debug every endpoint exception post-mortem (in live procs and procs started later)
        until switched off. Each failing endpoint then pauses until a debugger continues it."""
        self.post_mortem = enabled
        if enabled:
            os.environ[POST_MORTEM_ENV] = "1"
        else:
            os.environ.pop(POST_MORTEM_ENV, None)
        set_local_post_mortem(enabled)
        rt = get_runtime()
        for addr in _live_proc_addresses():
            rt.mailbox.post(addr, Control(CONTROL, "debug_mode", (enabled,), None))

    def ensure_server(self, host: str | None = None, port: int | None = None) -> tuple[str, int]:
        """Start the control server (`monarch debug`, `monarch stacks`, `monarch top` connect
        to it) if it is not running; its (host, port)."""
        with self._lock:
            if self.server is None:
                from monarch._src.admin.server import ControlServer

                self.server = ControlServer.start(self, host, port)
            return self.server.host, self.server.port


def _split_prompt(text: str) -> tuple[str, str]:
    """(output, prompt): pdb writes its prompt last, after the last newline."""
    cut = text.rfind("\n") + 1
    return text[:cut], text[cut:]


def _live_proc_addresses() -> list[str]:
    """Addresses of the procs this process started that are up (on every host agent)."""
    from monarch._src.lowlevel import agents

    return [addr for agent in agents() for addr in agent.live_addresses()]


def debug_controller_here() -> DebugController:
    """This process's debug controller (meaningful in the root client), created on first use."""
    global _controller
    if _controller is None:
        with _lock:
            if _controller is None:
                controller = DebugController()
                get_runtime().mailbox.on_peer_lost.append(controller._peer_lost)
                set_paused_source(controller.paused)
                _controller = controller
    return _controller


def debug_controller() -> DebugController:
    """The root client's debug controller; starts its server so `monarch debug` can attach.

    The server listens on `MONARCH_DEBUG_SERVER_HOST` (default localhost) and
    `MONARCH_DEBUG_SERVER_PORT` (default 27000; another free port if that one is taken), and its
    address is written to `.monarch/controller-<pid>.json` in the working directory.
    """
    rt = get_runtime()
    if not rt.is_controller:
        raise RuntimeError("debug_controller() is only available in the root client; actors "
                           "pause with breakpoint() and the client attaches to them.")
    controller = debug_controller_here()
    controller.ensure_server()
    return controller
