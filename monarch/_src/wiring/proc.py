"""A proc's wiring: what every proc monarch starts installs at start-up, before it serves.

Named (as "monarch._src.wiring.proc:install") in the spec of every proc, through the
`proc_setup` hook slot the controller wiring fills; `monarch._src.hosts.proc_main` imports and
calls it by that name (on whichever host the proc runs: the name travels in the spec).
"""

from __future__ import annotations

from monarch._src.wiring import controller

__all__ = ["install"]


def install() -> None:
    """Install the proc-side agents (idempotent): the debug agent (`breakpoint()`, post-mortem,
    stack dumps) in the proc's runtime. A proc is also a controller of the meshes it spawns, so
    it fills the controller's slots too."""
    from monarch._src.debug import agent as debug_agent

    debug_agent.install()
    controller.install()
