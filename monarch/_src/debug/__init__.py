"""The distributed debugger: `breakpoint()` in endpoints, post-mortem, `debug_controller()`.

`agent.py` is installed in every process (controller and procs) by the wiring
(`monarch._src.debug.agent.install()`), together with the stack-dump control operation of
`monarch._src.admin.stacks`; `actor_pdb.py` is the pdb that runs on a paused actor's thread
(imported only when an actor pauses); `controller.py` is the root client's `DebugController`
actor (the sessions of `session.py`, the `monarch_dbg>` shell of `command.py` on the terminals
of `io.py`) and `debug_controller()`, its face in the client's own threads; `source.py` serves
the client's source of code pickled by value to paused actors. `debug_controller` and
`DebugController` load the controller on first access, so a proc's start-up pays for neither
pdb nor the controller.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DebugController", "debug_controller"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from monarch._src.debug import controller

        return getattr(controller, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
