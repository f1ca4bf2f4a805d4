"""torchmonarch's `monarch._src.actor.debugger.debug_controller`: the `DebugController` actor
(`monarch._src.debug.controller`) and `debug_controller()`, which returns that actor (spawned in
the root client on first use) from any process."""

from monarch._src.debug.controller import DebugController, controller_mesh as debug_controller

__all__ = ["DebugController", "debug_controller"]
