"""The controller's wiring: what a controller process installs into the lower layers' hook slots.

Imported by `monarch.actor` (and so by everything that imports it). Installing is cheap: each
slot gets a small function that imports its feature on first use, so importing this module
imports neither torch nor the tensor engine.
"""

from __future__ import annotations

from monarch._src.mesh import hooks

__all__ = ["install"]

_installed = False


def install() -> None:
    """Fill the controller's hook slots (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    hooks.proc_setup.install(("monarch._src.wiring.proc:install",))
