"""Client-wide teardown: `shutdown_context()`."""

from __future__ import annotations

import concurrent.futures

from monarch._src.mesh import host_agent
from monarch._src.runtime.future import Future
from monarch._src.runtime.runtime import runtime_if_started

__all__ = ["shutdown_context"]


def shutdown_context() -> Future[None]:
    """Stop every proc this process started on its local host; idempotent."""
    local = [a for a in host_agent.agents() if a.is_local] if runtime_if_started() else []
    if not local:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return Future._create(done)
    return Future._create(local[0].shutdown())
