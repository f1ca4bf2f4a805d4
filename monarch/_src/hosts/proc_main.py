"""The main program of a proc: a mailbox on the main thread, serving until told to stop.

A host agent starts a proc with a spec (a dict): its id, the address of the controller that asked
for it, the controller's `sys.path` and runtime config, the "module:function" names of its set-up
(`setup`: the proc wiring, from the `proc_setup` hook slot of the process that asked) and an
optional bootstrap callable. The proc runs its set-up, starts its transport, runs the bootstrap,
reports `proc_ready` (or the bootstrap's failure) to the controller, then serves until a
`stop_proc` arrives: it stops its actors (running their cleanups), answers, flushes what it still
has to send, and exits.

The proc also restores the controller's environment and working directory, applies its
`proc_bind` CPUs first of all, and runs its loop on the main thread. Stopping waits for its
actors at most `stop_actor_timeout`, drains the transport, and exits with status 0.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

import monarch._src.mesh.agent  # noqa: F401  (installs the proc agent in new runtimes)
from monarch._src.config import apply_snapshot, duration_seconds, get as config_get
from monarch._src.hosts.control_ops import FlushLogs, Log, LogLevel, LogTail, ProcReady, StopProc
from monarch._src.mesh.hosted import HostedActor
from monarch._src.mesh.log_prefix import install_log_prefix
from monarch._src.mesh.logs import LogCapture, capture_paths
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import PortAddr, decode, encode
from monarch._src.runtime.mailbox import Mailbox
from monarch._src.runtime.ports import CountPort
from monarch._src.runtime.runtime import install_proc_runtime
from monarch._src.supervision.errors import ActorError, format_remote_traceback

__all__ = ["run_proc"]


def proc_sys_path(client_paths: list[str], client_prefixes: Iterable[str]) -> list[str]:
    """The proc's `sys.path`: the client's (its script's folder, PYTHONPATH, ...). When the proc
    runs another Python installation than the client (`with_python_executable`, a venv mounted
    with `remote_mount`), the entries inside the client's installation (its venv's
    site-packages, its standard library) go last, after this interpreter's own, so the proc
    imports its own packages first and the client's only as a fallback (the interpreter was
    started with the client's paths in PYTHONPATH, to find monarch)."""
    own = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots = {os.path.realpath(p) for p in client_prefixes} - own  # a shared base stays put
    if not roots or os.path.realpath(sys.prefix) in {os.path.realpath(p) for p in client_prefixes}:
        return list(client_paths)
    inside = tuple(root + os.sep for root in roots)

    def clients(path: str) -> bool:
        return (os.path.realpath(path or ".") + os.sep).startswith(inside)

    ordered: list[str] = []
    for path in ([p for p in client_paths if not clients(p)]
                 + [p for p in sys.path if not clients(p)]
                 + [p for p in client_paths if clients(p)] + list(sys.path)):
        if path not in ordered:
            ordered.append(path)
    return ordered


def run_proc(spec: dict[str, Any]) -> int:
    """Serve as the proc described by `spec`; returns the exit status."""
    os.environ.clear()
    os.environ.update(spec["env"])
    os.environ["MONARCH_PROC"] = "1"
    if spec.get("cpus"):  # spawn_procs(proc_bind=...), before any thread starts
        os.sched_setaffinity(0, spec["cpus"])
    sys.path[:] = proc_sys_path(spec["sys_path"], spec.get("prefixes", ()))
    try:
        os.chdir(spec["cwd"])
    except OSError:
        pass  # the client's directory need not exist on this host: stay where we are
    apply_snapshot(spec["config"])
    run_setup(spec.get("setup", ()))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mailbox = Mailbox(loop)
    addr = loop.run_until_complete(_listen(mailbox, spec))
    install_log_prefix()
    rt = install_proc_runtime(loop, mailbox, spec["proc_id"])
    rt.root_address = spec["root"]
    controller = spec["controller"]
    done: asyncio.Future[None] = loop.create_future()
    stopping: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak references

    def stop_proc(peer: str, op: StopProc, reply: PortAddr | None) -> None:
        task = loop.create_task(_stop_everything(mailbox, op.reason, reply, done))
        stopping.add(task)
        task.add_done_callback(stopping.discard)

    mailbox.control.register(StopProc, stop_proc)
    capture = _capture_output(spec, mailbox, controller)

    def flush_logs(peer: str, op: FlushLogs, reply: Any) -> None:
        def drain_then_answer() -> None:
            if capture is not None:
                capture.drain()
            mailbox.reply(reply, None)  # after every line the drain handed over

        threading.Thread(target=drain_then_answer, name="monarch-log-flush", daemon=True).start()

    def log_level(peer: str, op: LogLevel, reply: PortAddr | None) -> None:
        logging.getLogger().setLevel(op.level)
        if reply is not None:
            mailbox.reply(reply, None)

    mailbox.control.register(FlushLogs, flush_logs)
    mailbox.control.register(LogLevel, log_level)
    error = failure = None
    if spec.get("bootstrap") is not None:
        try:
            fn = decode(spec["bootstrap"])
            result = fn()
            if asyncio.iscoroutine(result):
                loop.run_until_complete(result)
        except BaseException as exc:  # reported to the controller, which fails the proc mesh
            error = f"bootstrap of proc {spec['proc_id']} failed: {type(exc).__name__}: {exc}"
            failure = _setup_failure(exc)
    ready = ProcReady(spec["proc_id"], addr, os.getpid(), error, failure)
    mailbox.post(controller, control(ready))
    loop.run_until_complete(done)
    for hook in reversed(rt.shutdown_hooks):  # e.g. procs this proc's actors started
        try:
            # Off the loop thread: a hook may wait for work the loop must do.
            loop.run_until_complete(loop.run_in_executor(None, hook))
        except Exception:  # exiting anyway; the zygotes' stdin watch ends what is left
            pass
    loop.run_until_complete(mailbox.transport.drain())
    return 0


def run_setup(names: tuple[str, ...] | list[str]) -> None:
    """Import and call each "module:function" of a proc's set-up (its proc-side agents: the
    debugger's breakpoint hook, stack dumps), before its runtime starts."""
    for name in names:
        module, _, function = name.partition(":")
        getattr(importlib.import_module(module), function)()


def _setup_failure(exc: BaseException) -> Any:
    """A bootstrap's exception as what Monarch's callers get from its setup actor: an
    `ActorError` for the call setup.setup (encoded; its text stands in when it cannot pickle)."""
    message = "Actor call setup.setup failed."
    try:
        return encode(ActorError(exc, message))
    except Exception:
        return encode(ActorError(RuntimeError(f"{type(exc).__name__}: {exc}"), message,
                                 format_remote_traceback(exc)))


async def _listen(mailbox: Mailbox, spec: dict[str, Any]) -> str:
    """Start the transport on `spec["listen"]`; with a `port_range` (a remote host's
    `remote_alloc_allowed_port_range`), on the first free port of that range."""
    listen = spec.get("listen")
    ports = spec.get("port_range")
    if ports is None or listen is None or not listen.endswith(":0"):
        return await mailbox.start(listen)
    host = listen.partition("://")[2].rpartition(":")[0].strip("[]")
    error: OSError | None = None
    for port in range(*ports):
        if not _port_free(host, port):  # (a failed listen would leak its socket)
            continue
        try:
            return await mailbox.start(f"{listen[:-1]}{port}")
        except OSError as exc:  # taken in between
            error = exc
    raise OSError(
        f"proc {spec['proc_id']}: no free port in remote_alloc_allowed_port_range "
        f"{ports[0]}..{ports[1]} on {listen[:-2]} ({error or 'every port is taken'}). Widen "
        f"the range."
    )


def _port_free(host: str, port: int) -> bool:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _capture_output(spec: dict[str, Any], mailbox: Mailbox, controller: str) -> LogCapture | None:
    """Point fds 1 and 2 at pipes when anything needs the output: forwarding to the client
    (`enable_log_forwarding`), a tail kept by the host agent for failure reports
    (`tail_log_lines`), files (`enable_file_capture`). Output not forwarded still reaches the
    original fds (the terminal)."""
    proc_id = spec["proc_id"]
    forwarding = bool(spec.get("log_forwarding", config_get("enable_log_forwarding")))
    tail = int(spec.get("tail_log_lines", 0))
    files = None
    prefix = f"[{spec['rank']}] " if config_get("prefix_with_rank") and "rank" in spec else ""
    if config_get("enable_file_capture"):
        try:
            files = {fd: open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
                     for fd, path in capture_paths(proc_id).items()}
        except OSError as exc:
            print(f"monarch: enable_file_capture: cannot open the log files of proc {proc_id}: "
                  f"{exc}", file=sys.stderr)
    if not (forwarding or tail > 0 or files):
        return None
    send = None
    if forwarding or tail > 0:
        output = Log if forwarding else LogTail

        def send(fd: int, text: str) -> None:
            mailbox.post(controller, control(output(proc_id, fd, text)))

    return LogCapture(send, passthrough=not forwarding, files=files, prefix=prefix)


async def _stop_everything(
    mailbox: Mailbox, reason: str, reply: Any, done: asyncio.Future[None]
) -> None:
    actors = [a for a in mailbox.actors.values() if isinstance(a, HostedActor)
              and not a.thread.stopped.is_set()]
    if actors:
        entry = CountPort(len(actors))
        port = mailbox.open_port(entry)
        for actor in actors:
            actor.request_stop(reason, port)
        try:
            await asyncio.wait_for(asyncio.wrap_future(entry.cf),
                                   timeout=duration_seconds("stop_actor_timeout"))
        except Exception:  # a cleanup that hangs or fails must not keep the proc alive
            pass
    if reply is not None:
        mailbox.reply(reply, None)
    await mailbox.transport.drain()
    if not done.done():
        done.set_result(None)
