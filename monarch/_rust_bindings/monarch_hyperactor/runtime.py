"""torchmonarch's `monarch_hyperactor.runtime`: runtime test helpers.

`sleep_indefinitely_for_unit_tests` blocks the calling thread for good (tests kill the process).
The GIL-on-control-plane counters measure where Monarch's Rust threads take the GIL; here the
control plane is Python on the runtime loop, so there is nothing to count and they raise.
"""

from __future__ import annotations

import threading

from monarch._rust_bindings.monarch_hyperactor.handle import in_runtime_thread

__all__ = ["sleep_indefinitely_for_unit_tests"]


def _is_in_tokio_runtime() -> bool:
    """Whether the caller runs on one of the runtime's own threads."""
    return in_runtime_thread()


def sleep_indefinitely_for_unit_tests() -> None:
    """Block the calling thread forever."""
    threading.Event().wait()


def _no_gil_counter(name: str) -> NotImplementedError:
    return NotImplementedError(
        f"{name}() counts GIL acquisitions by Monarch's Rust control plane; here the control "
        "plane is Python code on the runtime loop, which always holds the GIL while it runs."
    )


def _get_gil_on_control_plane() -> int:
    raise _no_gil_counter("_get_gil_on_control_plane")


def _reset_gil_on_control_plane() -> None:
    raise _no_gil_counter("_reset_gil_on_control_plane")


def _force_unsanctioned_gil_on_control_plane() -> None:
    raise _no_gil_counter("_force_unsanctioned_gil_on_control_plane")
