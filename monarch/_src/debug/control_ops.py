"""The debugger's control operations (`runtime/control.py`), handled by `agent.py`.

A paused actor's channel (`actor_pdb.py`) registers its session with the root client, sends
its output there and ends it; the root's controller (`controller.py`) sends the user's lines
back and switches post-mortem debugging on or off.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from monarch._src.lowlevel import control_op

__all__ = ["DebugEnd", "DebugInput", "DebugMode", "DebugOutput", "DebugRegister"]


@control_op("debug_register")
class DebugRegister(NamedTuple):
    """A paused actor opened session `sid` (to the root client)."""

    sid: str
    details: dict[str, Any]  # name, rank, coords, hostname, display, kind, where, address, pid


@control_op("debug_output")
class DebugOutput(NamedTuple):
    """What pdb wrote in session `sid`, and whether it now waits for a line (to the root)."""

    sid: str
    pieces: list[str]
    waiting: bool
    function: str | None
    lineno: int | None


@control_op("debug_end")
class DebugEnd(NamedTuple):
    """Session `sid` ended (to the root client)."""

    sid: str
    reason: str


@control_op("debug_input")
class DebugInput(NamedTuple):
    """A line the user typed for session `sid` (to the paused actor's process)."""

    sid: str
    line: str


@control_op("debug_mode")
class DebugMode(NamedTuple):
    """Switch post-mortem debugging of every endpoint exception on or off."""

    enabled: bool
