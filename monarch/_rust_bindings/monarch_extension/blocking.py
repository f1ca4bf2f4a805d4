"""torchmonarch's `monarch_extension.blocking`: `blocking_function`, a call that blocks the
calling thread for good (tests use it to see that a stuck endpoint can still be stopped)."""

import threading

__all__ = ["blocking_function"]


def blocking_function() -> None:
    """Block the calling thread forever."""
    threading.Event().wait()
