"""torchmonarch's `monarch.simulator.interface`: `Simulator` (as `monarch` exports it)."""

from monarch.simulator import Simulator

__all__ = ["Simulator"]
