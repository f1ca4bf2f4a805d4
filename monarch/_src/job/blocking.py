"""Blocking on a monarch `Future` from the synchronous job API, also inside a notebook.

`JobTrait.kill()` and friends are synchronous by contract. In a notebook cell an event loop runs
on the calling thread, where `Future.get()` warns that it blocks that loop; the job API blocks
on purpose (briefly, with a bound), so it waits from a helper thread instead.
"""

from __future__ import annotations

import threading
from typing import Any

from monarch._src.lowlevel import loop_running_here

__all__ = ["shutdown_quietly", "wait_for"]


def wait_for(fut: Any, timeout: float) -> Any:
    """`fut.get(timeout)`, waited for off any event loop running on this thread."""
    if not loop_running_here():
        return fut.get(timeout=timeout)
    box: list[tuple[bool, Any]] = []

    def wait() -> None:
        try:
            box.append((True, fut.get(timeout=timeout)))
        except BaseException as exc:  # noqa: BLE001  # re-raised in the caller's thread below
            box.append((False, exc))

    t = threading.Thread(target=wait, name="monarch-job-wait", daemon=True)
    t.start()
    t.join(timeout + 5.0)
    if not box:
        raise TimeoutError(f"Future did not complete within {timeout} seconds.")
    ok, value = box[0]
    if not ok:
        raise value
    return value


def shutdown_quietly(host_meshes: Any, timeout: float = 10.0) -> None:
    """Shut each host mesh down (bounded); a failure is ignored because the caller ends the
    workers another way right after (killing them, scancel, deleting their pods)."""
    for hm in host_meshes:
        try:
            wait_for(hm.shutdown(), timeout)
        except Exception:  # noqa: BLE001, S110 - the workers are ended another way
            pass
