"""Client-wide teardown: `shutdown_context()`."""

from __future__ import annotations

from monarch._src.mesh import host_agent
from monarch._src.runtime.future import Future
from monarch._src.runtime.runtime import runtime_if_started

__all__ = ["shutdown_context"]


def shutdown_context() -> Future[None]:
    """Stop every proc this process started on its local host; idempotent."""
    local = [a for a in host_agent.agents() if a.is_local] if runtime_if_started() else []
    if not local:
        return Future.from_value(None)
    return Future.from_concurrent(local[0].shutdown())
