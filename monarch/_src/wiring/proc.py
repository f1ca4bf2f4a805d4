"""A proc's wiring: what every proc monarch starts installs at start-up, before it serves.

Named (as "monarch._src.wiring.proc:install") in the spec of every proc, through the
`proc_setup` hook slot the controller wiring fills; `monarch._src.hosts.proc_main` imports and
calls it by that name.
"""

from __future__ import annotations

from monarch._src.wiring import controller

__all__ = ["install"]


def install() -> None:
    """Install the proc-side agents (idempotent). A proc is also a controller of the meshes it
    spawns, so it fills the controller's slots too."""
    controller.install()
