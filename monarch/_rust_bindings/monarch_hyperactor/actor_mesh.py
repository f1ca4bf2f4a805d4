"""torchmonarch's `monarch_hyperactor.actor_mesh`: `PythonActorMesh` and `hold_gil_for_test`.

`PythonActorMesh` is Monarch's Rust-side actor mesh, wrapped by `ActorMesh`; here `ActorMesh`
is the whole implementation, so the name only says where actor meshes come from.
`hold_gil_for_test` really holds the GIL from a background thread for a while (tests use it to
check that the control plane keeps going while Python code hogs the interpreter).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

__all__ = ["PythonActorMesh", "hold_gil_for_test"]


class PythonActorMesh:
    """Monarch's Rust actor mesh; has no counterpart here (see the module note)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "The Rust-side PythonActorMesh does not exist here: monarch.actor's ActorMesh is the "
            "whole actor mesh. Get one from proc_mesh.spawn(name, ActorClass)."
        )


def hold_gil_for_test(delay_secs: float, hold_secs: float) -> None:
    """After `delay_secs`, hold the GIL for about `hold_secs` from a background thread (returns
    at once)."""

    def hog() -> None:
        time.sleep(delay_secs)
        # A switch interval as long as the hold keeps this thread from handing the GIL over
        # while it spins; the interval is process-wide, so it is put back at once.
        previous = sys.getswitchinterval()
        sys.setswitchinterval(max(hold_secs, previous))
        try:
            end = time.monotonic() + hold_secs
            while time.monotonic() < end:
                pass
        finally:
            sys.setswitchinterval(previous)

    threading.Thread(target=hog, name="hold-gil-for-test", daemon=True).start()
