"""torchmonarch's `monarch_hyperactor.testing`: small objects Monarch's tests drive its bindings
with, here built on this package's `Handle` and plain classes.

`TestStruct` is a class with one method of its own (`rust_method`) for the mixin machinery of
`monarch._src.actor.python_extension_methods`; `_make_handle_probe(outcome)` is a producer
thread that starts, waits for `_release()`, then publishes its outcome to a real `Handle`.
"""

from __future__ import annotations

import threading
from typing import Any

from monarch._rust_bindings.monarch_hyperactor.handle import Handle, _new_handle_pair

__all__ = ["TestStruct"]

# The value a successful probe publishes.
_PROBE_SUCCESS_VALUE = 42


class TestStruct:
    """A value with a method of its own, for mixin tests."""

    __test__ = False  # not a pytest test class

    def __init__(self, value: int) -> None:
        self.value = value

    def rust_method(self) -> int:
        return self.value

    def shared_method(self) -> str:
        return "rust"


def _make_test_struct(value: int) -> TestStruct:
    return TestStruct(value)


class _HandleProbe:
    """One producer thread and its Handle: started, held until released, then completed."""

    def __init__(self, outcome: str) -> None:
        if outcome not in ("success", "exception", "base_exception"):
            raise ValueError(
                f"Unknown probe outcome {outcome!r}. "
                "Use 'success', 'exception' or 'base_exception'."
            )
        self._outcome = outcome
        self._handle_obj, completer = _new_handle_pair()
        self._started_ev = threading.Event()
        self._release_ev = threading.Event()
        self._done_ev = threading.Event()

        def produce() -> None:
            self._started_ev.set()
            self._release_ev.wait()
            if outcome == "success":
                completer.set_result(_PROBE_SUCCESS_VALUE)
            elif outcome == "exception":
                completer.set_exception(ValueError("probe failed"))
            else:
                completer.set_exception(KeyboardInterrupt("probe interrupted"))
            self._done_ev.set()

        threading.Thread(target=produce, name="handle-probe", daemon=True).start()
        self._started_ev.wait()

    def _handle(self) -> Handle[Any]:
        return self._handle_obj

    def _started(self) -> bool:
        return self._started_ev.is_set()

    def _completed(self) -> bool:
        return self._done_ev.is_set()

    def _release(self) -> None:
        self._release_ev.set()

    def _wait_completed(self) -> None:
        self._done_ev.wait()


def _make_handle_probe(outcome: str) -> _HandleProbe:
    """A probe whose handle reaches `outcome` ("success", "exception", "base_exception") once
    released."""
    return _HandleProbe(outcome)
