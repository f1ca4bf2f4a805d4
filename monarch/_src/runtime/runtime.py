"""The process-global runtime: one mailbox and the loop that drives it.

On the controller (a script or a notebook kernel) the loop runs on a daemon thread started on
first use, like Dask's IO loop, so `Future.get()` can block any other thread, the kernel's
included. In a proc started by a host agent, the loop runs on the main thread
(`install_proc_runtime`). Either way there is exactly one `Runtime` per process.

The controller's runtime starts, under a lock, on the first `get_runtime()`: a daemon thread named
"monarch-runtime" runs a fresh asyncio loop, starts the mailbox on `tcp://127.0.0.1:0` (or on the
`default_transport` address when that is a `scheme://address`, or on a fresh unix socket under
`ChannelTransport.Unix`), then runs the `on_start` hooks; an `atexit` handler runs
`shutdown_hooks`, the last added first. The controller is a proc too: `this_proc()` is a one-proc
mesh at its own address, where `get_or_spawn_controller` spawns its singletons.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from monarch._src.runtime.hook import Hook
from monarch._src.runtime.mailbox import Mailbox

__all__ = [
    "Runtime",
    "ShutdownHook",
    "StartHook",
    "get_runtime",
    "install_on_start",
    "install_proc_runtime",
    "on_start",
    "runtime_if_started",
]

T = TypeVar("T")

_lock = threading.Lock()
_runtime: Runtime | None = None


class StartHook(Protocol):
    """`on_start`'s callbacks: `hook(rt)` with a runtime about to be handed out."""

    def __call__(self, rt: Runtime, /) -> None: ...


class ShutdownHook(Protocol):
    """`Runtime.shutdown_hooks`' callbacks: close what they own (at exit: bounded)."""

    def __call__(self) -> None: ...


#: Called, in the order added, with each new runtime before it is handed out (on the thread that
#: starts it); upper layers register their agents and control operations here. A callback that
#: raises fails the runtime's start.
on_start: Hook[StartHook] = Hook("on_start", "Run with each runtime this process starts.")


def install_on_start(hook: StartHook) -> None:
    """Call `hook(rt)` with the runtime already running, if any, and with every runtime started
    later (idempotent: a hook already registered is left as it is)."""
    if on_start.add(hook):
        rt = _runtime
        if rt is not None:  # installed after the runtime started
            hook(rt)


class Runtime:
    """The mailbox of this process and the loop that drives it."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, mailbox: Mailbox, proc_id: str, is_controller: bool
    ) -> None:
        self.loop = loop
        self.mailbox = mailbox
        self.proc_id = proc_id  # unique name of this process within the job
        self.is_controller = is_controller  # True in the user's (client) process
        self.loop_thread: threading.Thread | None = None  # set on the controller
        # Run at exit (and by a proc's shutdown), last added first; one that raises is skipped.
        self.shutdown_hooks: Hook[ShutdownHook] = Hook("shutdown_hooks", "Run at exit, last first.")
        self.root_address: str | None = None  # the root client's address; None on the client

    @property
    def address(self) -> str:
        return self.mailbox.address

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the runtime loop (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the runtime loop (any thread)."""
        self.loop.call_soon_threadsafe(fn, *args)


def runtime_if_started() -> Runtime | None:
    return _runtime


def get_runtime() -> Runtime:
    """This process's runtime, starting the controller's on first use (thread-safe)."""
    rt = _runtime
    if rt is not None:
        return rt
    with _lock:
        if _runtime is None:
            _start_controller_runtime()
    assert _runtime is not None
    return _runtime


def _start_controller_runtime() -> None:
    global _runtime
    loop = asyncio.new_event_loop()
    mailbox = Mailbox(loop)
    started: concurrent.futures.Future[str] = concurrent.futures.Future()

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def boot() -> None:
            try:
                started.set_result(await mailbox.start(_listen_address()))
            except BaseException as exc:
                started.set_exception(exc)

        loop.run_until_complete(boot())
        loop.run_forever()

    thread = threading.Thread(target=run, name="monarch-runtime", daemon=True)
    thread.start()
    started.result(timeout=60)
    rt = Runtime(loop, mailbox, f"client-{os.getpid()}-{uuid.uuid4().hex[:6]}", True)
    rt.loop_thread = thread
    mailbox.loop_thread = thread
    for hook in on_start:
        hook(rt)
    _runtime = rt
    atexit.register(_atexit_shutdown)


def _listen_address() -> str | None:
    """An explicit `default_transport` address; for `TcpWithHostname` this machine's routable
    address; else None: the transport picks tcp or tls on loopback."""
    # config is stdlib-only and cheap
    from monarch._src.config import ChannelTransport, check_usable, get as config_get

    transport = config_get("default_transport")
    check_usable(transport)
    if isinstance(transport, str) and "://" in transport:
        return transport
    if transport is ChannelTransport.TcpWithHostname:
        # Reachable from other machines (remote hosts attached later dial back to it).
        scheme = "tls" if config_get("enable_tls") else "tcp"
        return f"{scheme}://{routable_ip()}:0"
    return None


def routable_ip() -> str:
    """This machine's address on its default route (no packet is sent), else its hostname's."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.123", 9))  # TEST-NET-1: only the routing table is consulted
            ip = str(s.getsockname()[0])
            if ip != "0.0.0.0":
                return ip
        except OSError:
            pass  # no route off this machine: fall back to the host name below
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def install_proc_runtime(
    loop: asyncio.AbstractEventLoop, mailbox: Mailbox, proc_id: str
) -> Runtime:
    """Make `mailbox` this proc's runtime; its loop runs on the calling (main) thread."""
    global _runtime
    rt = Runtime(loop, mailbox, proc_id, False)
    rt.loop_thread = threading.current_thread()
    mailbox.loop_thread = rt.loop_thread
    for hook in on_start:
        hook(rt)
    _runtime = rt
    return rt


def _atexit_shutdown() -> None:
    rt = _runtime
    if rt is None:
        return
    for hook in reversed(rt.shutdown_hooks):
        try:
            hook()
        except Exception:  # teardown at exit is best effort; never mask the exit status
            pass
