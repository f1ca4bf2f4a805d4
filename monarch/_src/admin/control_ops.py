"""The admin feature's control operations (`runtime/control.py`): what one process asks
another about itself. `stacks.py` and `introspect.py` handle them."""

from __future__ import annotations

from typing import NamedTuple

from monarch._src.lowlevel import control_op

__all__ = ["Introspect", "Stacks"]


@control_op("stacks")
class Stacks(NamedTuple):
    """Answer with the receiving process's stacks (a `StackDump`)."""

    py_spy: bool  # also run py-spy on it
    py_spy_json: bool  # py-spy's output as its JSON


@control_op("introspect")
class Introspect(NamedTuple):
    """Answer with the receiving process's actors (`local_introspect`)."""

    frames: bool  # with each actor's current Python frames
