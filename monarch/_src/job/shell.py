"""`shell(host_mesh)`: an interactive shell on the one host of a host mesh, over monarch ports.

A `ShellActor` on a proc of that host runs the user's shell (`$SHELL`, else bash) with `-i` on
a pseudo-terminal of its own (a new session, the terminal its controlling one), so job
control, prompts, line editing and full-screen programs work as over ssh. Terminal bytes travel
on two channels: the client's input (with window sizes and the hang-up) to the actor, the
terminal's output (then the exit status) back. The client puts its own terminal in raw mode
when it is one and forwards window changes (SIGWINCH).

End of the client's input hangs the session up: the shell's process groups get SIGHUP, then
SIGTERM and SIGKILL for what still runs after a grace period, as when a terminal closes. The
shell exiting (`exit 7`) ends the session with its status; a signal's death is reported as 128
plus the signal number. A failure writing the client's output (a closed pipe) is raised.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import tty
from collections.abc import Iterator
from typing import Any, TextIO

from monarch._src.job.blocking import wait_for
from monarch._src.job.exec import rank_env
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import current_rank
from monarch._src.mesh.port import Channel, Port

__all__ = ["ShellActor", "shell"]

# Bytes read from a terminal at a time.
_CHUNK = 16 * 1024
# Seconds the session's processes get after SIGHUP (and again after SIGTERM) before harder signals.
_GRACE = 1.0
# Bounds on starting the remote shell, on stopping its procs, and on the whole session.
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 30.0
_SESSION_TIMEOUT = 7 * 24 * 3600.0

# Messages. Client to actor: ("data", bytes), ("size", (rows, columns)), ("close",).
# Actor to client: ("data", bytes), ("exit", status), ("error", text).
Message = tuple[Any, ...]

# Makes the new session's terminal the controlling one, then runs the shell (argv[1:]).
_CTTY_EXEC = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
              "os.execvp(sys.argv[1], sys.argv[1:])")


def _set_window_size(fd: int, size: tuple[int, int]) -> None:
    rows, columns = size
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def _window_size(fd: int) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return 24, 80
    return size.lines, size.columns


def exit_status(returncode: int) -> int:
    """A process's status as a shell reports it: a death by signal N is 128 + N."""
    return returncode if returncode >= 0 else min(128 - returncode, 255)


class ShellActor(Actor):
    """Runs one interactive shell on a pseudo-terminal of its proc (see the module doc)."""

    def __init__(self) -> None:
        self._point = current_rank()
        self._process: subprocess.Popen[bytes] | None = None
        self._master: int | None = None

    @endpoint
    def start(self, output: Port[Message], env: dict[str, str] | None, workdir: str | None,
              client_cwd: str, terminal: str, window: tuple[int, int]) -> Port[Message]:
        """Start the shell, sending its terminal's output to `output`; returns the port that
        takes the client's input."""
        if self._process is not None:
            raise RuntimeError("this ShellActor already runs a shell; spawn another one")
        child_env = {**os.environ, **rank_env(self._point), **(env or {}), "TERM": terminal}
        program = child_env.get("SHELL") or "/bin/bash"
        if workdir is not None and not os.path.isdir(workdir):
            raise FileNotFoundError(f"shell: the working directory {workdir!r} does not exist on "
                                    "this host; pass an existing workdir.")
        cwd = workdir or (client_cwd if os.path.isdir(client_cwd) else None)
        master, slave = os.openpty()
        try:
            _set_window_size(master, window)
            self._process = subprocess.Popen(
                [sys.executable, "-c", _CTTY_EXEC, program, "-i"], stdin=slave, stdout=slave,
                stderr=slave, cwd=cwd, env=child_env, start_new_session=True)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self._master = master
        port, receiver = Channel[Message].open()
        process = self._process
        threading.Thread(target=self._pump_output, args=(master, process, output, port),
                         name="monarch-shell-output", daemon=True).start()
        threading.Thread(target=self._pump_input, args=(master, process, receiver),
                         name="monarch-shell-input", daemon=True).start()
        return port

    @staticmethod
    def _pump_output(master: int, process: subprocess.Popen[bytes], output: Port[Message],
                     input_port: Port[Message]) -> None:
        try:
            while True:
                try:
                    data = os.read(master, _CHUNK)
                except OSError as exc:
                    if exc.errno == errno.EIO:  # every process let go of the terminal
                        break
                    raise
                if not data:
                    break
                output.send(("data", data))
            output.send(("exit", exit_status(process.wait())))
        except Exception as exc:  # noqa: BLE001 - reported to the client, which ends the session
            output.send(("error", f"{type(exc).__name__}: {exc}"))
            _hang_up(master, process)
        finally:
            input_port.send(("done",))  # ends the input pump
            os.close(master)

    @staticmethod
    def _pump_input(master: int, process: subprocess.Popen[bytes], receiver: Any) -> None:
        while True:
            message = wait_for(receiver.recv(), _SESSION_TIMEOUT)
            kind = message[0]
            if kind == "done":
                return
            if process.poll() is not None:
                continue  # the output pump reports the end; nothing left to write to
            try:
                if kind == "data":
                    view = memoryview(message[1])
                    while view:
                        view = view[os.write(master, view):]
                elif kind == "size":
                    _set_window_size(master, message[1])
                elif kind == "close":
                    _hang_up(master, process)
            except OSError:
                _hang_up(master, process)  # the terminal is gone: end what runs on it


def _session_groups(master: int, process: subprocess.Popen[bytes]) -> set[int]:
    groups = {process.pid}  # the shell leads its own session and process group
    with contextlib.suppress(OSError):
        groups.add(os.tcgetpgrp(master))  # the foreground job
    groups.discard(os.getpgrp())
    return {g for g in groups if g > 1}


def _signal(groups: set[int], sig: int) -> set[int]:
    """Send `sig` to each group; returns the groups that still existed."""
    alive = set()
    for group in groups:
        try:
            os.killpg(group, sig)
            alive.add(group)
        except ProcessLookupError:
            pass  # the group is gone already: nothing left to signal
        except PermissionError:
            alive.add(group)
    return alive


def _hang_up(master: int, process: subprocess.Popen[bytes]) -> None:
    """End the session as a closing terminal does: SIGHUP, then SIGTERM, then SIGKILL."""
    groups = _session_groups(master, process)
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGKILL):
        groups = _signal(groups, sig)
        if not groups:
            break
        deadline = time.monotonic() + _GRACE
        while time.monotonic() < deadline and _signal(groups, 0):
            time.sleep(0.02)
        groups = _signal(groups, 0)
        if not groups:
            break
    with contextlib.suppress(OSError):
        process.wait(timeout=_GRACE)


@contextlib.contextmanager
def _raw(fd: int) -> Iterator[None]:
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])


class _Input:
    """Forwards the client's input to the session from a thread, until stopped."""

    def __init__(self, fd: int, port: Port[Message]) -> None:
        self._fd = fd
        self._port = port
        self._wake_r, self._wake_w = os.pipe()
        self._stopped = False
        self._resized = False
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="monarch-shell-client-input",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def resized(self, *_: Any) -> None:
        """SIGWINCH handler: the input thread sends the new size."""
        self._resized = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"w")

    def _run(self) -> None:
        try:
            while True:
                readable, _, _ = select.select([self._fd, self._wake_r], [], [])
                if self._wake_r in readable:
                    os.read(self._wake_r, 64)
                    if self._stopped:
                        return
                    if self._resized:
                        self._resized = False
                        self._port.send(("size", _window_size(self._fd)))
                if self._fd in readable:
                    data = os.read(self._fd, _CHUNK)
                    if not data:
                        self._port.send(("close",))
                        return
                    self._port.send(("data", data))
        except BaseException as exc:  # noqa: BLE001 - raised by shell() once the session ends
            self.error = exc
            with contextlib.suppress(Exception):
                self._port.send(("close",))

    def stop(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"s")
        self._thread.join(timeout=_STOP_TIMEOUT)
        os.close(self._wake_r)
        os.close(self._wake_w)


def _fileno(stream: Any, name: str) -> int:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        raise TypeError(
            f"shell needs {name} to be a terminal or a pipe (a file with a descriptor), got "
            f"{type(stream).__name__}. For scripted commands use exec_command."
        ) from None


def _host_count(host_mesh: Any) -> int:
    size = getattr(host_mesh, "size", None)
    return int(size() if callable(size) else len(host_mesh))


def shell(host_mesh: Any, *, env: dict[str, str] | None = None, workdir: str | None = None,
          stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """An interactive shell on the one host of `host_mesh`; returns its exit status.

    The shell gets `MONARCH_RANK_*`/`MONARCH_SIZE_*` and `env`, and starts in `workdir` (else
    this process's working directory when the host has it). Input comes from `stdin` and the
    terminal's output goes to `stdout` (default: this process's), each a terminal or a pipe.
    End of input hangs the session up. A host mesh of more than one host raises `ValueError`.
    """
    n = _host_count(host_mesh)
    if n != 1:
        raise ValueError(
            f"shell requires a singleton HostMesh (one host); this one has {n}. Slice one host "
            "out first, e.g. state.hosts.slice(hosts=0)."
        )
    inp = stdin if stdin is not None else sys.stdin
    outp = stdout if stdout is not None else sys.stdout
    in_fd, out_fd = _fileno(inp, "stdin"), _fileno(outp, "stdout")
    outp.flush()
    procs = host_mesh.spawn_procs(name="shell")
    try:
        actor = procs.spawn("_ShellActor", ShellActor)
        output, receiver = Channel[Message].open()
        input_port = wait_for(actor.start.call_one(
            output, env, workdir, os.getcwd(), os.environ.get("TERM", "xterm-256color"),
            _window_size(in_fd)), _START_TIMEOUT)
        return _forward(input_port, receiver, in_fd, out_fd)
    finally:
        wait_for(procs.stop(), _STOP_TIMEOUT)


def _forward(input_port: Port[Message], receiver: Any, in_fd: int, out_fd: int) -> int:
    """Copy terminal bytes both ways until the session ends; returns the shell's status."""
    pump = _Input(in_fd, input_port)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGWINCH) if in_main else None
    if in_main:
        signal.signal(signal.SIGWINCH, pump.resized)
    finished = False
    try:
        with _raw(in_fd):
            if os.isatty(out_fd):
                _write_all(out_fd, b"\r")
            pump.start()
            while True:
                message = wait_for(receiver.recv(), _SESSION_TIMEOUT)
                kind = message[0]
                if kind == "data":
                    _write_all(out_fd, message[1])
                elif kind == "exit":
                    finished = True
                    status = int(message[1])
                    break
                else:
                    finished = True
                    raise RuntimeError(f"the remote shell failed: {message[1]}")
    finally:
        if not finished:  # our side failed (a closed output): end the remote session
            with contextlib.suppress(Exception):
                input_port.send(("close",))
        pump.stop()
        if in_main:
            signal.signal(signal.SIGWINCH, signal.SIG_DFL if previous is None else previous)
    if pump.error is not None:
        raise pump.error
    return status
