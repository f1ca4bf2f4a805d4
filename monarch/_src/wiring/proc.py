"""A proc's wiring: what every proc monarch starts installs at start-up, before it serves.

Named (as "monarch._src.wiring.proc:install") in the spec of every proc, through the
`proc_setup` hook slot the controller wiring fills; `monarch._src.hosts.proc_main` imports and
calls it by that name (on whichever host the proc runs: the name travels in the spec).
"""

from __future__ import annotations

from monarch._src.mesh.cancellation import make_sleep_cancellable
from monarch._src.wiring import controller

__all__ = ["install"]


def install() -> None:
    """Install the proc-side agents (idempotent). A proc is also a controller of the meshes it
    spawns, and the controller wiring already installs the debug agent (`breakpoint()`,
    post-mortem, stack dumps) in the process it runs in, so this is the controller's
    `install()`, plus what only procs do: `time.sleep` becomes a cancellation point of sync
    endpoints (`mesh.cancellation.make_sleep_cancellable`)."""
    controller.install()
    make_sleep_cancellable()
