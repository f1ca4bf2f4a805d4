"""Client-wide teardown: `shutdown_context()`."""

from __future__ import annotations

import concurrent.futures

from monarch._src.runtime.future import Future
from monarch._src.runtime.runtime import runtime_if_started

__all__ = ["shutdown_context"]


def shutdown_context() -> Future[None]:
    """Stop every proc this process started on its local host; idempotent."""
    done: concurrent.futures.Future[None] = concurrent.futures.Future()
    rt = runtime_if_started()
    if rt is None:
        done.set_result(None)
        return Future._create(done)
    from monarch._src.hosts import local

    agent = local._agent
    if agent is None:
        done.set_result(None)
        return Future._create(done)
    return Future._create(agent.shutdown())
