"""The fork server of the embedded local host.

Starting a Python process and importing the runtime costs most of a second; forking a process that
already did costs milliseconds. The controller starts one zygote per process on first use; the
zygote imports the proc runtime, then forks a proc per request.

Protocol: requests arrive on stdin and replies leave on the fd given as argv[1], each a
length-prefixed pickle. Requests: `{"spawn": [spec, ...]}`, `{"kill": [pid, ...], "sig": n}` and
`{"preload": [module, ...], "environ": {...}}` (import modules the controller uses before the
next forks, under the controller's environment of that moment).
Replies: `{"spawned": [(proc_id, pid), ...]}` and `{"exit": pid, "status": text}` for each child
that ended (the host agent's child watch). When stdin closes (the controller exited or died), when
the controller is seen to exit (a pidfd of it, should a process the controller forked still hold
stdin open) and on SIGTERM, the zygote kills its children and exits, so no proc outlives its
controller; each child also asks the kernel to kill it if the zygote dies (PR_SET_PDEATHSIG). The
files a reaped child made and could not remove (its socket, its shared memory), and the
controller's once it is gone, are removed here (`transport/owned_files.py`).

Rejected alternative: forking the controller itself. It may run threads (the runtime loop, a
Jupyter kernel's) and hold locks a forked child would inherit locked.

It runs as `python -m monarch._src.hosts.zygote` in the directory that holds the controller's
`monarch` package, so a `monarch/` in the user's working directory cannot shadow it, and it
imports no top-layer module. Once it imported what procs need it freezes that heap
(`gc.freeze`): the procs' collections skip it and forked pages stay shared. Children are reaped
on SIGCHLD, each exit reported as `Exited(n)` or `Killed(sig=n)`. It ignores SIGINT (a kernel's
interrupt reaches its whole process group). The controller reaps the zygote as soon as it ends
(`prestart.py`'s thread): a Jupyter kernel shutting down waits for every child of its group,
zombies included. `mesh_orphan_timeout` paces its check that the controller is still there.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import pickle
import select
import signal
import struct
import sys
from typing import Any

from monarch._src.transport.owned_files import sweep_ended

_HEADER = struct.Struct("!Q")
_PR_SET_PDEATHSIG = 1
# The directory that holds this `monarch` package (this file is monarch/_src/hosts/zygote.py).
_MONARCH_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def write_message(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj)
    msg = _HEADER.pack(len(data)) + data
    view = memoryview(msg)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int) -> Any:
    head = read_exact(fd, _HEADER.size)
    if head is None:
        return None
    body = read_exact(fd, _HEADER.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"Killed(sig={sig})"
    return f"Exited({os.waitstatus_to_exitcode(status)})"


def _set_pdeathsig() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # not Linux: the zygote's stdin watch still ends orphans
        pass


def _child(spec: dict[str, Any], close_fds: list[int], zygote_pid: int) -> None:
    status = 1
    try:
        for fd in close_fds:
            try:
                os.close(fd)
            except OSError:
                pass  # not open in this child: nothing to close
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle
        if spec.get("pdeathsig", True):  # mesh_bootstrap_enable_pdeathsig
            _set_pdeathsig()
        if os.getppid() != zygote_pid:  # the zygote died before PDEATHSIG was set
            os._exit(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        if spec.get("command"):
            status = _exec_command(spec)  # spawn_procs(bootstrap_command=); returns on error
            return
        if spec.get("python"):
            _exec_interpreter(spec)  # HostMesh.with_python_executable; returns only on error
        from monarch._src.hosts.proc_main import run_proc

        status = run_proc(spec)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def _exec_interpreter(spec: dict[str, Any]) -> None:
    """Become `spec["python"]` running the proc: same pid (the child watch still works), same
    parent-death signal; the spec travels in an anonymous file (see `hosts/exec_proc.py`)."""
    python = spec["python"]
    env = _with_monarch_path(dict(os.environ))
    fd = _spec_file(spec, env)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(python, [python, "-m", "monarch._src.hosts.exec_proc", str(fd)], env)


def _spec_file(spec: dict[str, Any], exec_env: dict[str, str]) -> int:
    """An inheritable anonymous file holding `spec` (and `exec_env`, the environment the new
    program starts with, so that the proc can tell what its launcher changed: exec_proc.py)."""
    fd = os.memfd_create("monarch-proc-spec", 0)
    data = pickle.dumps({**spec, "exec_env": exec_env})
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


def _with_monarch_path(env: dict[str, str]) -> dict[str, str]:
    """`env` with this monarch first on PYTHONPATH: the proc must speak the same protocol as its
    host (and an editable install is not visible through PYTHONPATH alone)."""
    paths = (_MONARCH_ROOT, env.get("PYTHONPATH"))
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _exec_command(spec: dict[str, Any]) -> int:
    """Become the proc's bootstrap command (`hosts/bootstrap_command.py`): its program, argv and
    environment (`spec["env"]`, computed by the host agent), the spec in an anonymous file named
    by MONARCH_PROC_SPEC_FD. Returns (an exit status) only if the exec failed."""
    from monarch._src.hosts.bootstrap_command import SPEC_FD_ENV

    command = spec["command"]
    env = _with_monarch_path(dict(spec["env"]))
    fd = _spec_file({k: v for k, v in spec.items() if k != "command"}, env)
    env[SPEC_FD_ENV] = str(fd)
    argv = [command["arg0"] or command["program"], *command["args"]]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command["program"], argv, env)
    except OSError as exc:
        print(f"monarch: proc {spec['proc_id']}: cannot run bootstrap_command program "
              f"{command['program']!r}: {exc}", file=sys.stderr)
    return 127


def _orphan_poll_interval() -> float:
    try:
        from monarch._src.config import duration_seconds

        timeout = duration_seconds("mesh_orphan_timeout")
    except Exception:  # a bad setting must not keep orphans alive: use the default's pace
        timeout = 30.0
    return max(0.05, min(1.0, timeout / 5))


def _open_pidfd(pid: int) -> int | None:
    """A pidfd of `pid`, readable once it exited; None where there is none (not Linux 5.3+)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def main() -> None:
    # A Jupyter kernel's restart (and its stop button) interrupts the kernel's whole process
    # group, this zygote included: the interrupt is the controller's to handle, from the start
    # (a zygote still importing would die of it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reply_fd = int(sys.argv[1])
    cmd_fd = sys.stdin.fileno()
    controller = os.getppid()
    # Preload what every proc needs, once, before any fork: the proc runtime and the Dask comm
    # layer its transport starts with (which the controller's import leaves for later).
    import monarch._src.hosts.proc_main  # noqa: F401
    from monarch._src.transport.comm import preload

    preload()
    # What is loaded now lives as long as the procs: the garbage collector of each proc skips
    # it (its full passes cost in proportion to the objects it tracks: tens of thousands from
    # the imports alone), and forked children keep sharing its pages instead of copying the
    # ones a collection would write to.
    gc.freeze()

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # SIGTERM ends the zygote as a closed stdin does: its children killed and reaped, their files
    # removed. ipykernel sends it to every process of its group when it shuts down, and
    # `job/pids.py` to the process groups it ends.
    terminated: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: terminated.append(signum))
    children: set[int] = set()
    zygote_pid = os.getpid()
    # The controller's death closes our stdin, unless a child it forked holds the pipe open:
    # then a pidfd of the controller (Linux), readable once it exited, ends us at once; failing
    # that, noticing that our parent changed does, within mesh_orphan_timeout.
    watch_every = _orphan_poll_interval()
    watched = [cmd_fd, wake_r]
    controller_fd = _open_pidfd(controller)
    if controller_fd is not None:
        watched.append(controller_fd)

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            children.discard(pid)
            sweep_ended([pid])  # what it made and could not remove (killed), before it is reported
            write_message(reply_fd, {"exit": pid, "status": describe_status(status)})

    try:
        while True:
            ready, _, _ = select.select(watched, [], [], watch_every)
            if terminated or controller_fd in ready or os.getppid() != controller:
                break
            if wake_r in ready:
                os.read(wake_r, 4096)
                reap()
            if cmd_fd not in ready:
                continue
            msg = read_message(cmd_fd)
            if msg is None:
                break
            if "spawn" in msg:
                spawned = []
                for spec in msg["spawn"]:
                    pid = os.fork()
                    if pid == 0:
                        _child(spec, [*watched, reply_fd, wake_w], zygote_pid)
                    children.add(pid)
                    spawned.append((spec["proc_id"], pid))
                write_message(reply_fd, {"spawned": spawned})
            elif "preload" in msg:
                # Modules the controller uses (torch, say) are imported once here, so each
                # forked proc has them instead of importing them itself. They read the
                # environment as it is now in the controller (settings made since this zygote
                # started, `OMP_NUM_THREADS` say), as in a proc that imported them itself.
                os.environ.update(msg.get("environ", {}))
                for name in msg["preload"]:
                    try:
                        importlib.import_module(name)
                    except Exception:  # the proc will import it itself, and see the error
                        pass
                gc.freeze()  # as after the first preload
            elif "kill" in msg:
                for pid in msg["kill"]:
                    if pid in children:
                        try:
                            os.kill(pid, msg.get("sig", signal.SIGKILL))
                        except ProcessLookupError:
                            pass  # exited already; its exit is reported as usual
            reap()
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # exited already
        for pid in list(children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # reaped already
        # And the controller's, if it is gone (killed: that is why we stop).
        sweep_ended([*children, controller])


if __name__ == "__main__":
    main()
