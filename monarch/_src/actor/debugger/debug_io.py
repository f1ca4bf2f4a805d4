"""torchmonarch's `monarch._src.actor.debugger.debug_io`: the debugger's terminals
(`monarch._src.debug.io`)."""

from monarch._src.debug.io import DebugCliIO, DebugIO, DebugIOError, DebugStdIO

__all__ = ["DebugCliIO", "DebugIO", "DebugIOError", "DebugStdIO"]
