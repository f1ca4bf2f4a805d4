"""Stack dumps of a proc on demand: every thread's Python stack, and py-spy's view when installed.

Every process answers a `stacks` control operation (`install()`, through `runtime.on_start`). The
answer is built off the runtime loop, on a short-lived thread, so a proc whose actors are busy or
paused still answers: the loop only hands the request over. Python stacks come from
`sys._current_frames()`, with each actor's thread labelled by the actor it runs. py-spy (when
the `py-spy` executable is on PATH and the system lets it attach) adds native frames and the GIL
holder; when it cannot run, the dump says why and keeps the Python stacks.

`dump_stacks(address)` asks a process (this one included) and waits, bounded, for the answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any

from monarch._src.admin.control_ops import Stacks
from monarch._src.lowlevel import (
    OncePort,
    Runtime,
    control,
    decode_reply,
    get_runtime,
    install_on_start,
)

__all__ = ["StackDump", "dump_stacks", "install", "install_stacks", "python_stacks"]



@dataclass(frozen=True)
class StackDump:
    """The stacks of one process."""

    proc_id: str  # the monarch proc id of the process
    pid: int
    python: str  # every thread's Python stack
    py_spy: str | None  # py-spy's dump, or None when it did not run
    py_spy_note: str  # why py-spy did not run, or ""

    def __str__(self) -> str:
        parts = [f"=== proc {self.proc_id} (pid {self.pid}) ===", self.python.rstrip()]
        if self.py_spy is not None:
            parts += ["--- py-spy ---", self.py_spy.rstrip()]
        elif self.py_spy_note:
            parts.append(f"(py-spy: {self.py_spy_note})")
        return "\n".join(parts) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"proc_id": self.proc_id, "pid": self.pid, "python": self.python,
                "py_spy": self.py_spy, "py_spy_note": self.py_spy_note}


def _actor_threads(rt: Runtime | None) -> dict[int, str]:
    """Thread ident -> display name of the actor it runs."""
    from monarch._src.mesh.hosted import HostedActor

    out: dict[int, str] = {}
    if rt is None:
        return out
    for actor in list(rt.mailbox.actors.values()):
        if isinstance(actor, HostedActor) and actor.thread.thread.ident is not None:
            out[actor.thread.thread.ident] = actor.display
    return out


def python_stacks(rt: Runtime | None = None, skip_current: bool = False) -> str:
    """Every thread's Python stack in this process, actor threads labelled (without the
    calling thread's if `skip_current`: the helper thread answering a request)."""
    actors = _actor_threads(rt)
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    lines: list[str] = []
    for ident, frame in sorted(sys._current_frames().items()):
        if skip_current and ident == me:
            continue
        label = f"Thread {names.get(ident, '?')} ({ident})"
        if ident in actors:
            label += f" actor {actors[ident]}"
        lines.append(label + ":")
        lines.extend(s.rstrip("\n") for s in traceback.format_stack(frame))
        lines.append("")
    return "\n".join(lines)


def _py_spy(pid: int, as_json: bool = False) -> tuple[str | None, str]:
    from monarch._src.config import duration_seconds, get as config_get

    configured = str(config_get("pyspy_bin"))
    if configured:
        exe: str | None = shutil.which(configured)
        if exe is None:
            return None, f"pyspy_bin {configured!r} is not an executable"
    else:
        exe = shutil.which("py-spy") or _venv_py_spy()
    if exe is None:
        return None, "not installed"
    timeout = duration_seconds("mesh_admin_pyspy_timeout")
    try:
        done = subprocess.run([exe, "dump", "--pid", str(pid), *(["--json"] if as_json else [])],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:g} s (mesh_admin_pyspy_timeout)"
    except OSError as exc:
        return None, f"could not run: {exc}"
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return done.stdout, ""


def _venv_py_spy() -> str | None:
    """py-spy installed next to this interpreter (a venv not on PATH)."""
    candidate = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return candidate if os.access(candidate, os.X_OK) else None


def _dump(rt: Runtime | None, use_py_spy: bool, skip_current: bool,
          as_json: bool = False) -> StackDump:
    proc_id = rt.proc_id if rt is not None else f"pid-{os.getpid()}"
    python = python_stacks(rt, skip_current)
    spy, note = _py_spy(os.getpid(), as_json) if use_py_spy else (None, "not requested")
    return StackDump(proc_id, os.getpid(), python, spy, note)


def install_stacks(rt: Runtime) -> None:
    """Register the `stacks` control operation in `rt`."""

    def stacks(peer: str, op: Stacks, reply: Any) -> None:
        use_py_spy, as_json = bool(op.py_spy), bool(op.py_spy_json)

        def answer() -> None:
            try:
                rt.mailbox.reply(reply, _dump(rt, use_py_spy, True, as_json))
            except Exception as exc:  # answer the asker rather than leave it waiting
                rt.mailbox.reply_error(reply, RuntimeError(f"stack dump failed: {exc}"))

        threading.Thread(target=answer, name="monarch-stacks", daemon=True).start()

    rt.mailbox.control.register(Stacks, stacks)


def dump_stacks(address: str, *, py_spy: bool = True, py_spy_json: bool = False,
                timeout: float = 30.0) -> StackDump:
    """Ask the process at `address` for its stacks (py-spy's as its JSON with `py_spy_json`);
    raises `TimeoutError` after `timeout` s."""
    rt = get_runtime()
    if address == rt.address:
        return _dump(rt, py_spy, False, py_spy_json)
    entry = OncePort()
    port = rt.mailbox.open_port(entry, (address,))
    rt.mailbox.post(address, control(Stacks(py_spy, py_spy_json), port))
    try:
        reply = entry.cf.result(timeout=timeout)
    except TimeoutError:
        raise TimeoutError(f"The process at {address} did not answer a stack dump request "
                           f"within {timeout:.0f} s.") from None
    result: StackDump = decode_reply(reply)
    return result


def install() -> None:
    """Answer `stacks` and `introspect` requests in this process (idempotent): in the runtime
    already running, if any, and in every runtime started later. The debug agent's `install()`
    calls it."""
    from monarch._src.admin.introspect import install_introspect

    install_on_start(install_stacks)
    install_on_start(install_introspect)
