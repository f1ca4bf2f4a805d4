"""A broken connection to one of the local host agent's procs: let the child watch say why.

When a proc's connection breaks, the proc may be exiting (the child watch will report it with
its exit status, the better report) or alive with only the connection gone. `confirm_lost`
waits for the difference: half a second after the break, a process that is still running (not
exiting) means the connection itself failed and the address is marked dead with the transport's
error; one that is exiting or gone is left to the child watch.
"""

from __future__ import annotations

from monarch._src.procstat import process_alive
from monarch._src.runtime.runtime import Runtime

__all__ = ["CONFIRM_DELAY", "confirm_lost"]

CONFIRM_DELAY = 0.5  # seconds between looks at a proc whose connection broke


def confirm_lost(rt: Runtime, addr: str, err: BaseException, pid: int) -> None:
    """Look at `pid` (the proc at `addr`) again; called `CONFIRM_DELAY` after the break, then
    every `CONFIRM_DELAY` while it is exiting but not yet reported (runtime loop)."""
    if rt.mailbox.is_dead(addr):
        return
    if process_alive(pid):
        rt.mailbox.mark_dead(addr, err)
    else:
        rt.loop.call_later(CONFIRM_DELAY, confirm_lost, rt, addr, err, pid)

