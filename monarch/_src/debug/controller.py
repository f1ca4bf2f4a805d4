"""The debug controller: the root client's actor that every paused actor reports to.

Paused actors (a `breakpoint()` in an endpoint, or post-mortem on an endpoint's exception) send
control messages to the root client (`actor_pdb.py`); the root's runtime loop hands them to the
`DebugController` actor, spawned there on first use as the controller named `debug_controller`
(`get_or_spawn_controller`, so a subclass spawned under that name first takes its place). It
keeps the sessions (`session.py`) by actor mesh name and rank, and offers several terminals onto
them, all running on its loop:

* its terminal server (TCP on `MONARCH_DEBUG_SERVER_HOST`:`MONARCH_DEBUG_SERVER_PORT`, default
  localhost:27000, another free port if that one is taken): plain lines in, text out, the
  `monarch_dbg>` shell (`attach`, `list`, `cast`, `continue`, `help`, `quit`; see `command.py`).
  `monarch debug --host H --port P` or any TCP client (`nc H P`) is a terminal. Like pdb itself
  it runs whatever code its user types, so it listens on loopback unless told otherwise;
* the same shell on the controller process's stdin/stdout (`_enter` with `DebugStdIO`);
* in the same process (a notebook cell, a script), `debug_controller()`: `attach()` runs a pdb
  prompt through `input()` (in Jupyter, the kernel's stdin shows it in the cell), or feeds a
  scripted list of commands (`attach(commands=[...])`) and returns the transcript;
* the client's control server (`monarch._src.admin.server`, JSON lines with a token), which the
  first session starts: `monarch debug` without flags finds it and lists and attaches through it.

Every wait here is bounded or follows a live session; a session nobody attaches to resumes by
itself after `MONARCH_DEBUG_IDLE_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from monarch._src.admin.model import set_paused_source
from monarch._src.debug.agent import POST_MORTEM_ENV, set_local_post_mortem
from monarch._src.debug.command import (
    Attach,
    Cast,
    Continue,
    DebugCommand,
    Help,
    ListCommand,
    Quit,
    RanksType,
)
from monarch._src.debug.control_ops import DebugInput, DebugMode
from monarch._src.debug.env import PROTOCOL_ENV, debug_server_address
from monarch._src.debug.io import BridgeIO, DebugCliIO, DebugIO, DebugIOError, DebugStdIO, ScriptIO
from monarch._src.debug.session import DebugSession, DebugSessionInfo, DebugSessions
from monarch._src.lowlevel import control, get_runtime
from monarch._src.mesh.actor import Actor, concurrent_endpoint, endpoint
from monarch._src.mesh.controller import get_or_spawn_controller

__all__ = ["CONTROLLER_NAME", "DebugClient", "DebugController", "SessionHandle", "SessionInfo",
           "controller_mesh",
           "debug_controller", "debug_controller_here", "deliver"]

logger = logging.getLogger(__name__)

CONTROLLER_NAME = "debug_controller"

_HELP = """monarch_dbg commands:
\tattach <actor_name> <rank> - attach to a debug session (type 'detach' to come back here)
\tlist - list all debug sessions
\tquit - exit the debugger, leaving all sessions in place
\tcast <actor_name> ranks(...) <command> - send a pdb command to several ranks of an actor mesh.
\t\tranks(...) holds one rank (ranks(1)), a list (ranks(1,4,6)), a range
\t\t(ranks(start?:stop?:step?)) or dimensions (ranks(hosts=1:5:2, gpus=3, dim=(3,6))).
\tcontinue - clear all breakpoints and tell all ranks to continue
\thelp - print this help message
"""


class DebugController(Actor):
    """The registry of paused actors and the terminals onto them (one per root client)."""

    def __init__(self) -> None:
        self.sessions = DebugSessions()
        self._task_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None  # the shell of the terminal server's client
        self._debug_io: DebugIO = DebugStdIO()
        # __init__ runs on the actor's thread with its loop hidden (as in any sync __init__).
        loop = asyncio.get_event_loop_policy().get_event_loop()
        self._loop = loop
        self._server: asyncio.Future[asyncio.Server] = loop.create_future()
        self._server_task = loop.create_task(self._serve())
        self._by_sid: dict[str, DebugSession] = {}  # live transport ids -> their session
        self._added = asyncio.Event()
        _hub.bind(self, loop)

    # ---- the terminal server ------------------------------------------------------------------
    async def _serve(self) -> None:
        try:
            protocol = os.environ.get(PROTOCOL_ENV) or "tcp"
            if protocol != "tcp":
                raise NotImplementedError(
                    f"{PROTOCOL_ENV}={protocol!r}: the debug server speaks only 'tcp'.")
            host, port = debug_server_address()
            try:
                server = await asyncio.start_server(self._handle_client, host, port)
            except OSError as exc:
                if port == 0:
                    raise
                logger.warning("monarch: debug server port %s:%s is taken (%s); using a free "
                               "port", host, port, exc)
                server = await asyncio.start_server(self._handle_client, host, 0)
        except Exception as exc:
            if not self._server.done():
                self._server.set_exception(exc)
            logger.error("monarch: the debug terminal server did not start: %s", exc)
            return
        self._server.set_result(server)

    async def _handle_client(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        # One terminal at a time: a new client replaces the previous one.
        async with self._task_lock:
            if self._task is not None:
                self._task.cancel()
                try:
                    await self._task
                except (DebugIOError, asyncio.CancelledError):
                    pass  # the replaced terminal's session ended; the new one takes over
            self._debug_io = DebugCliIO(reader, writer)
            self._task = asyncio.get_running_loop().create_task(self._client_shell(writer))

    async def _client_shell(self, writer: asyncio.StreamWriter) -> None:
        try:
            await self._enter()
        except DebugIOError:
            pass  # the client went away; its sessions wait for the next one
        finally:
            writer.close()

    # ---- endpoints ----------------------------------------------------------------------------
    @concurrent_endpoint
    async def wait_pending_session(self) -> None:
        """Return once at least one actor is paused."""
        while len(self.sessions) == 0:
            self._added.clear()
            await self._added.wait()

    @endpoint
    async def list(self, print_output: bool = True) -> list[DebugSessionInfo]:
        """The paused actors (printed as a table on the current terminal unless told not to)."""
        infos = self.sessions.info()
        if print_output:
            await self._debug_io.output(_table(infos))
        return infos

    @endpoint
    async def server_address(self) -> tuple[str, int]:
        """(host, port) where the terminal server listens."""
        server = await self._server
        host, port = server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    # ---- the shell ----------------------------------------------------------------------------
    async def _enter(self) -> None:
        """The `monarch_dbg>` shell on the current terminal, until `quit`."""
        io = self._debug_io
        await io.output("\n\n************************ MONARCH DEBUGGER ************************\n"
                        "Enter 'help' for a list of commands.\n"
                        "Enter 'list' to show all active breakpoints.\n\n")
        while True:
            try:
                line = await io.input("monarch_dbg> ")
                if not line.strip():
                    continue
                command = await DebugCommand.parse(io, line)
                if isinstance(command, Help):
                    await io.output(_HELP)
                elif isinstance(command, Attach):
                    await self.sessions.get(command.actor_name, command.rank).attach(io)
                elif isinstance(command, ListCommand):
                    await io.output(_table(self.sessions.info()))
                elif isinstance(command, Continue):
                    await self._cast_input_and_wait("clear")
                    await self._cast_input_and_wait("c")
                elif isinstance(command, Quit):
                    await io.quit()
                    return
                elif isinstance(command, Cast):
                    await self._cast_input_and_wait(command.command,
                                                    (command.actor_name, command.ranks))
            except (DebugIOError, asyncio.CancelledError):
                raise
            except Exception as exc:  # noqa: BLE001 - a bad command must not end the shell
                await io.output(f"Error processing command: {exc}\n")

    async def _cast_input_and_wait(
        self, command: str, selection: tuple[str, RanksType | None] | None = None
    ) -> None:
        """Answer the next request of every selected session with `command`."""
        await asyncio.gather(*(session.attach(self._debug_io, command, suppress_output=True)
                               for session in self.sessions.iter(selection)))

    # ---- events from paused actors (this actor's loop, through the hub) ----------------------
    def _on_register(self, sid: str, details: dict[str, Any]) -> None:
        name, rank = str(details["name"]), int(details["rank"])
        if (name, rank) in self.sessions:
            session = self.sessions.get(name, rank)  # a later stop of the same call
            session.details.update(details)
        else:
            session = DebugSession(rank, dict(details.get("coords") or {}),
                                   str(details.get("hostname", "")), name, details=details)
            session.deliver = _deliverer(session)
            self.sessions.insert(session)
            self._added.set()
            _hub.changed()
            self._announce(session)
        session.details["sid"] = sid
        self._by_sid[sid] = session

    def _on_output(self, sid: str, pieces: builtins.list[str], waiting: bool,
                   function: str | None, lineno: int | None) -> None:
        session = self._by_sid.get(sid)
        if session is None:
            return
        for piece in pieces:
            session.write(piece, function, lineno)
        if not pieces and function is not None and lineno is not None:
            session.write("", function, lineno)
        if waiting:
            session.request_input()

    def _on_end(self, sid: str, reason: str) -> None:
        session = self._by_sid.pop(sid, None)
        if session is None or session.details.get("sid") != sid:
            return  # an earlier stop of a session that goes on
        key = (session.actor_name, session.rank)
        if key in self.sessions and self.sessions.get(*key) is session:
            self.sessions.remove(*key)
        session.end()
        _hub.changed()

    def _on_peer_lost(self, address: str, err: str) -> None:
        for sid, session in list(self._by_sid.items()):
            if session.details.get("address") == address and session.details.get("sid") == sid:
                session.write(f"\n*** the actor's process is gone: {err}\n")
                self._on_end(sid, "process lost")

    def _announce(self, session: DebugSession) -> None:
        """Start the control server (the first session does) and say where to attach."""
        client = debug_controller_here()
        try:
            host, port = client.ensure_server()
        except Exception as exc:  # noqa: BLE001 - the terminal server still serves
            logger.warning("monarch: the control server did not start: %s", exc)
            return
        if not client.announce:
            return
        sys.stderr.write(
            f"monarch: actor {session.actor_name} rank {session.rank} paused "
            f"({session.details.get('kind', 'breakpoint')}: {session.details.get('where', '?')});"
            f" attach with `monarch debug --host {host} --port {port}` or "
            "debug_controller().attach()\n")


def _deliverer(session: DebugSession) -> Callable[[str], None]:
    def deliver_line(line: str) -> None:
        get_runtime().mailbox.post(str(session.details["address"]), control(
            DebugInput(str(session.details["sid"]), line)))

    return deliver_line


def _table(infos: list[DebugSessionInfo]) -> str:
    """The sessions as a grid, one row each."""
    headers = ["Actor Name", "Rank", "Coords", "Hostname", "Function", "Line No."]
    rows = [[i.actor_name, str(i.rank), str(i.coords), i.hostname, str(i.function),
             str(i.lineno)] for i in infos]
    widths = [max(len(c) for c in col) for col in zip(headers, *rows, strict=False)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"

    def line(cells: list[str]) -> str:
        return "|" + "|".join(f" {c:<{w}} " for c, w in zip(cells, widths, strict=True)) + "|\n"

    return rule + line(headers) + rule.replace("-", "=") + "".join(
        line(r) + rule for r in rows) + ("" if rows else rule)


# ---- the root's side: from control messages to the controller actor ---------------------------
class _Hub:
    """Routes the paused actors' control messages (runtime loop) to the controller actor's loop,
    in arrival order; messages that arrive before a controller exists wait for it, and the
    first one spawns the default controller."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.controller: DebugController | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.bound = threading.Event()
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._spawning = False
        self._watching = False
        self._changed = threading.Condition()

    def bind(self, controller: DebugController, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self.controller is not None:
                logger.warning("monarch: a second DebugController was started in this process; "
                               "paused actors keep reporting to the first")
                return
            self.controller, self.loop = controller, loop
            for method, args in self._pending:
                loop.call_soon_threadsafe(getattr(controller, method), *args)
            self._pending.clear()
        self.bound.set()
        self.watch()

    def deliver(self, method: str, *args: Any) -> None:
        """Run `controller.<method>(*args)` on the controller's loop (any thread)."""
        self.watch()
        with self._lock:
            if self.controller is not None and self.loop is not None:
                try:
                    self.loop.call_soon_threadsafe(getattr(self.controller, method), *args)
                    return
                except RuntimeError:  # the controller's loop is closed: it was stopped
                    self.controller = self.loop = None
                    self.bound.clear()
            self._pending.append((method, args))
            if self._spawning:
                return
            self._spawning = True
        threading.Thread(target=self._spawn_default, name="monarch-debug-controller-spawn",
                         daemon=True).start()

    def _spawn_default(self) -> None:
        try:
            get_or_spawn_controller(CONTROLLER_NAME, DebugController).get(timeout=60)
            if not self.bound.wait(60):
                raise TimeoutError("the debug controller did not start within 60 s")
        except Exception as exc:  # noqa: BLE001 - logged; paused actors resume on their own
            logger.error("monarch: could not start the debug controller: %s", exc)
        finally:
            with self._lock:
                self._spawning = False

    def watch(self) -> None:
        """Follow lost processes (their sessions end) and feed the admin view (once)."""
        with self._changed:
            if self._watching:
                return
            self._watching = True
        get_runtime().mailbox.on_peer_lost.add(self._peer_lost)
        set_paused_source(self.paused)

    def _peer_lost(self, address: str, err: BaseException) -> None:
        if self.controller is not None:  # no controller, no sessions to end
            self.deliver("_on_peer_lost", address, str(err))

    def paused(self) -> list[tuple[str, int]]:
        """(actor mesh name, rank) of each paused actor: what the admin view shows as paused."""
        controller = self.controller
        if controller is None:
            return []
        return [(s.actor_name, s.rank) for s in controller.sessions.all()]

    def changed(self) -> None:
        """A session came or went (controller loop)."""
        with self._changed:
            self._changed.notify_all()

    def wait_changed(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)


_hub = _Hub()


def deliver(method: str, *args: Any) -> None:
    """Hand a paused actor's control message to the controller (the root's runtime loop)."""
    _hub.deliver(method, *args)


# ---- the in-process face: debug_controller() ---------------------------------------------------
@dataclass(frozen=True)
class SessionInfo:
    """What `DebugClient.sessions()` lists about one paused actor."""

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


def _info(session: DebugSession) -> SessionInfo:
    d = session.details
    return SessionInfo(session.actor_name, session.rank,
                       str(d.get("display", f"{session.actor_name}[{session.rank}]")),
                       str(d.get("kind", "breakpoint")), str(d.get("where", "?")),
                       int(d.get("pid", 0)))


class _Claim:
    """A session's attachment lock, as the control server uses it; releasing it detaches."""

    def __init__(self, handle: SessionHandle) -> None:
        self._handle = handle

    def acquire(self, timeout: float = -1) -> bool:
        return self._handle.session.claim.acquire(timeout=timeout)

    def release(self) -> None:
        self._handle.detach()
        self._handle.session.claim.release()


class SessionHandle:
    """One paused actor for a thread outside the controller's loop (the control server, tests):
    `read()` its output, `send()` it commands. The first `read` (or `reshow_prompt`) attaches,
    showing again what pdb wrote since the last command."""

    def __init__(self, session: DebugSession, loop: asyncio.AbstractEventLoop) -> None:
        self.session = session
        self.info = _info(session)
        self.ended = session.ended  # set once the actor's call is over
        self.claim = _Claim(self)
        self._loop = loop
        self._bridge: BridgeIO | None = None

    def _attached(self) -> BridgeIO:
        if self._bridge is None:
            bridge = self._bridge = BridgeIO(self._loop)

            async def run() -> None:
                try:
                    await self.session.attach(bridge, banner=False)
                except DebugIOError:
                    pass  # detached
                finally:
                    bridge.finish()

            asyncio.run_coroutine_threadsafe(run(), self._loop)
        return self._bridge

    def reshow_prompt(self) -> None:
        """Attach now: the pending prompt is shown again."""
        self._attached()

    def read(self, timeout: float) -> tuple[str, bool] | None:
        """The next output chunk and whether the actor now waits for a command; None once the
        attachment ended. Raises `TimeoutError` if nothing came within `timeout` seconds."""
        bridge = self._attached()
        try:
            item = bridge.chunks.get(timeout=timeout)
        except Exception:  # queue.Empty
            raise TimeoutError(f"The paused actor {self.info.display} sent nothing for "
                               f"{timeout:.0f} s.") from None
        if item is None:
            bridge.chunks.put(None)  # later reads see the end too
        return item

    def send(self, line: str) -> None:
        """Send one debugger command to the paused actor."""
        if self.ended.is_set():
            raise RuntimeError(f"The debug session of {self.info.display} has ended; the actor "
                               "is running again.")
        self._attached().send(line)

    def detach(self) -> None:
        """Leave the session paused for the next attachment."""
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None


class DebugClient:
    """The debug controller as seen from the root client's own threads (`debug_controller()`).

    Endpoints of the controller actor (`list`, `wait_pending_session`, ...) are reachable as
    attributes too: `debug_controller().list.call_one(print_output=False).get()`.
    """

    def __init__(self) -> None:
        self.post_mortem = os.environ.get(POST_MORTEM_ENV) == "1"
        self.server: Any = None  # the ControlServer, once started
        self.announce = True  # print a line to stderr when an actor pauses
        self._lock = threading.Lock()
        self._mesh: Any = None

    # ---- the actor ----------------------------------------------------------------------------
    def _controller(self) -> DebugController:
        if _hub.controller is None:
            mesh = get_or_spawn_controller(CONTROLLER_NAME, DebugController).get(timeout=60)
            with self._lock:
                self._mesh = self._mesh or mesh
            if not _hub.bound.wait(60):
                raise TimeoutError("The debug controller did not start within 60 s.")
        controller = _hub.controller
        assert controller is not None
        return controller

    def _loop(self) -> asyncio.AbstractEventLoop:
        self._controller()
        assert _hub.loop is not None
        return _hub.loop

    @property
    def mesh(self) -> Any:
        """The controller actor (an actor mesh of one)."""
        if self._mesh is None:
            mesh = get_or_spawn_controller(CONTROLLER_NAME, DebugController).get(timeout=60)
            with self._lock:
                self._mesh = self._mesh or mesh
        return self._mesh

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.mesh, name)

    # ---- queries ------------------------------------------------------------------------------
    def sessions(self) -> list[SessionInfo]:
        """The paused actors, ordered by mesh name and rank."""
        controller = _hub.controller
        return [] if controller is None else [_info(s) for s in controller.sessions.all()]

    def paused(self) -> list[tuple[str, int]]:
        """(actor mesh name, rank) of each paused actor."""
        return _hub.paused()

    def session(self, name: str | None = None, rank: int | None = None,
                timeout: float = 0.0) -> SessionHandle:
        """The session of actor `name` at `rank` (either may be None: any), waiting up to
        `timeout` seconds for one to appear."""
        loop = self._loop()
        controller = self._controller()
        deadline = time.monotonic() + timeout
        while True:
            for s in controller.sessions.all():
                if name in (None, s.actor_name) and rank in (None, s.rank):
                    return SessionHandle(s, loop)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _hub.wait_changed(min(left, 1.0))
        paused = ", ".join(f"{s.actor_name}[{s.rank}]" for s in controller.sessions.all())
        what = "any actor" if name is None else f"actor {name}" + (
            "" if rank is None else f" rank {rank}")
        raise LookupError(f"No paused session for {what} (paused: {paused or 'none'}). Call an "
                          "endpoint that reaches breakpoint() first, or pass timeout= to wait "
                          "for one.")

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
        """Debug a paused actor until its endpoint call ends (or `detach` is typed); returns
        the session's transcript.

        Waits up to `timeout` seconds for a matching session (the first one if `name` is None);
        once attached, it follows the actor as long as the call runs (`continue` resumes it; a
        later stop in the same call asks again). Commands come from `commands` (then `continue`
        when they run out, so a script never blocks) or else from `input(prompt)`
        (`builtins.input`: in Jupyter, a prompt in the cell). pdb's output is written to
        `output` (default `sys.stdout`) as it arrives.
        """
        handle = self.session(name, rank, timeout=timeout)
        loop = self._loop()
        if _on_loop_thread(loop):
            raise RuntimeError("attach() blocks until the session ends; call it from the client's "
                               "own thread, not from the debug controller's.")
        session, info = handle.session, handle.info
        io = ScriptIO(output if output is not None else sys.stdout,
                      iter(commands) if commands is not None else None,
                      input if input is not None else builtins.input)
        if not session.claim.acquire(timeout=timeout):
            raise RuntimeError(f"Another debugger is attached to {info.display}.")
        try:
            io.write(f"--- attached to {info.display} ({info.kind}) ---\n")
            future: concurrent.futures.Future[None] = asyncio.run_coroutine_threadsafe(
                session.attach(io, banner=False), loop)
            future.result()
            io.flush()
            if session.ended.is_set():
                io.write(f"--- {info.display} resumed ---\n")
            else:
                io.write(f"--- detached from {info.display}; it stays paused ---\n")
            io.flush()
        finally:
            session.claim.release()
        return "".join(io.transcript)

    # ---- post-mortem and the control server ---------------------------------------------------
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
            rt.mailbox.post(addr, control(DebugMode(enabled)))

    def ensure_server(self, host: str | None = None, port: int | None = None) -> tuple[str, int]:
        """Start the control server (`monarch debug`, `monarch stacks`, `monarch top` connect
        to it) if it is not running; its (host, port)."""
        with self._lock:
            if self.server is None:
                from monarch._src.admin.server import ControlServer

                self.server = ControlServer.start(self, host, port)
            return self.server.host, self.server.port


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _live_proc_addresses() -> list[str]:
    """Addresses of the procs this process started that are up (on every host agent)."""
    from monarch._src.lowlevel import agents

    return [addr for agent in agents() for addr in agent.live_addresses()]


_client_lock = threading.Lock()
_client: DebugClient | None = None


def debug_controller_here() -> DebugClient:
    """This process's face of the debug controller (meaningful in the root client)."""
    global _client
    if _client is None:
        with _client_lock:
            if _client is None:
                _client = DebugClient()
    return _client


def debug_controller() -> DebugClient:
    """The root client's debug controller; starts its servers so `monarch debug` can attach.

    The control server listens on `MONARCH_DEBUG_SERVER_HOST` (default localhost) and
    `MONARCH_DEBUG_SERVER_PORT` (default 27000; another free port if that one is taken), and its
    address is written to `.monarch/controller-<pid>.json` in the working directory.
    """
    rt = get_runtime()
    if not rt.is_controller:
        raise RuntimeError("debug_controller() is only available in the root client; actors "
                           "pause with breakpoint() and the client attaches to them.")
    client = debug_controller_here()
    client._controller()
    client.ensure_server()
    return client


def controller_mesh() -> Any:
    """The `DebugController` actor of the root client (spawned there on first use), from any
    process: what torchmonarch's `debugger.debug_controller.debug_controller()` returns."""
    return get_or_spawn_controller(CONTROLLER_NAME, DebugController).get(timeout=60)
