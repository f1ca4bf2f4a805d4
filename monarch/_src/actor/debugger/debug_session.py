"""torchmonarch's `monarch._src.actor.debugger.debug_session`: the controller's sessions
(`monarch._src.debug.session`)."""

from monarch._src.debug.session import DebugSession, DebugSessionInfo, DebugSessions

__all__ = ["DebugSession", "DebugSessionInfo", "DebugSessions"]
