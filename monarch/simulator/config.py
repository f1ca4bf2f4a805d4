"""torchmonarch's `monarch.simulator.config`: `set_meta` (as `monarch` exports it)."""

from monarch.simulator import set_meta

__all__ = ["set_meta"]
