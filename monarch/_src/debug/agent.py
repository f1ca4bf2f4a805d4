"""The debugger's part of every process: control operations and `sys.breakpointhook`.

`install()` hooks it (and the stack-dump control of `monarch._src.admin.stacks`) into this
process's runtime, the running one and any started later (`runtime.on_start`). The wiring calls
it: `monarch._src.wiring.controller` in a client, `monarch._src.wiring.proc` in every proc.

* `breakpoint()` on an actor's thread stops that actor under an `ActorPdb`; anywhere else (the
  user's own script, a thread of their own) the hook that was installed before runs, so a
  script's breakpoint still opens the ordinary pdb. From the first such stop on, the mesh tells
  the debugger when an endpoint returns (the `endpoint_done` hook slot: the call's session ends)
  or raises (the `endpoint_error` hook slot: a call that stopped is debugged post-mortem).
* `debug_input(sid, line)`: a debugger command for a paused actor of this process.
* `debug_mode(post_mortem)`: switch post-mortem debugging of endpoint exceptions on or off here.
  Procs started while it is on see `MONARCH_DEBUG_POST_MORTEM=1` in their environment.
* `debug_register`, `debug_output`, `debug_end`: sessions reporting to the root client's
  `DebugController` actor (only the root receives these; `controller.deliver` hands them over).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from monarch._src.admin import stacks
from monarch._src.debug.control_ops import (
    DebugEnd,
    DebugInput,
    DebugMode,
    DebugOutput,
    DebugRegister,
)
from monarch._src.lowlevel import Runtime, hooks, install_on_start, runtime_if_started
from monarch._src.mesh.context import current_hosted

__all__ = ["POST_MORTEM_ENV", "install", "install_debug_agent", "set_local_post_mortem"]

logger = logging.getLogger(__name__)

POST_MORTEM_ENV = "MONARCH_DEBUG_POST_MORTEM"
_previous_hook: Callable[..., Any] | None = None  # the breakpointhook before ours


def _breakpoint_hook(*args: Any, **kwargs: Any) -> Any:
    actor = current_hosted()
    rt = runtime_if_started()
    if actor is None or rt is None or os.environ.get("PYTHONBREAKPOINT") == "0":
        hook = _previous_hook or sys.__breakpointhook__
        return hook(*args, **kwargs)
    from monarch._src.debug import actor_pdb  # pdb is loaded only when an actor pauses

    global _stopped
    _stopped = True
    hooks.endpoint_done.install(_call_done_hook)
    hooks.endpoint_error.install(_post_mortem_hook)
    actor_pdb.set_trace(rt, actor, sys._getframe(1))
    return None


_post_mortem_all = False  # every endpoint exception is debugged (set_post_mortem)
_stopped = False  # an actor of this process stopped in the debugger at least once


def _call_done_hook(actor: Any) -> None:
    actor_pdb = sys.modules.get("monarch._src.debug.actor_pdb")
    if actor_pdb is None:
        return
    try:
        actor_pdb.end_call()
    except Exception:  # the debugger must never change the endpoint's outcome
        logger.exception("monarch: ending the debug session of %s failed", actor.display)


def _post_mortem_hook(actor: Any, method: str, exc: BaseException) -> None:
    rt = runtime_if_started()
    if rt is None:
        return
    try:
        from monarch._src.debug import actor_pdb

        if _post_mortem_all or actor_pdb.current_debugger() is not None:
            actor_pdb.post_mortem(rt, actor, method, exc)
    except Exception:  # the debugger must never change the endpoint's outcome
        logger.exception("monarch: post-mortem debugging of %s failed", method)


def set_local_post_mortem(enabled: bool) -> None:
    """Switch post-mortem debugging of every endpoint exception in this process on or off (an
    endpoint call that stopped in the debugger is debugged post-mortem either way)."""
    global _post_mortem_all
    _post_mortem_all = enabled
    if enabled or _stopped:
        hooks.endpoint_error.install(_post_mortem_hook)
    else:
        hooks.endpoint_error.clear()  # dispatch pays nothing for debugging


def install_debug_agent(rt: Runtime) -> None:
    """Register the debugger's control operations in `rt` and route `breakpoint()`."""
    global _previous_hook
    mailbox = rt.mailbox

    def debug_input(peer: str, op: DebugInput, reply: Any) -> None:
        # No session can be waiting unless an actor here paused, which loaded the module.
        actor_pdb = sys.modules.get("monarch._src.debug.actor_pdb")
        if actor_pdb is not None:
            actor_pdb.deliver_input(op.sid, op.line)

    def debug_mode(peer: str, op: DebugMode, reply: Any) -> None:
        set_local_post_mortem(bool(op.enabled))
        if reply is not None:
            mailbox.reply(reply, None)

    # The session's messages, handed to the root's controller (`controller.deliver`).
    def debug_register(peer: str, op: DebugRegister, reply: Any) -> None:
        from monarch._src.debug.controller import deliver

        deliver("_on_register", op.sid, op.details)

    def debug_output(peer: str, op: DebugOutput, reply: Any) -> None:
        from monarch._src.debug.controller import deliver

        deliver("_on_output", op.sid, op.pieces, op.waiting, op.function, op.lineno)

    def debug_end(peer: str, op: DebugEnd, reply: Any) -> None:
        from monarch._src.debug.controller import deliver

        deliver("_on_end", op.sid, op.reason)

    control = mailbox.control
    control.register(DebugInput, debug_input)
    control.register(DebugMode, debug_mode)
    control.register(DebugRegister, debug_register)
    control.register(DebugOutput, debug_output)
    control.register(DebugEnd, debug_end)
    if sys.breakpointhook is not _breakpoint_hook:
        _previous_hook = sys.breakpointhook
        sys.breakpointhook = _breakpoint_hook
    if os.environ.get(POST_MORTEM_ENV) == "1":
        set_local_post_mortem(True)


def install() -> None:
    """Install the debugger and the stack dumps in this process (idempotent): in the runtime
    already running, if any, and in every runtime started later."""
    stacks.install()
    install_on_start(install_debug_agent)
