"""torchmonarch's `monarch._src.actor.debugger.debug_command`: the `monarch_dbg>` shell's commands
and their parser (`monarch._src.debug.command`)."""

from monarch._src.debug.command import (
    Attach,
    Cast,
    Continue,
    DebugCommand,
    Help,
    ListCommand,
    Quit,
    RanksType,
)

__all__ = ["Attach", "Cast", "Continue", "DebugCommand", "Help", "ListCommand", "Quit",
           "RanksType"]
