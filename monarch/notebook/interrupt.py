"""Waiting in a cell: an interrupted wait shows one line, and a blocking `get()` does not warn.

Interrupting the kernel while a cell waits on a Future (`get()`, `await`) cancels the calls
behind it (`Future.cancel`) and raises `Interrupted`, a `KeyboardInterrupt` saying what was
cancelled. IPython would show it with the whole stack, monarch's frames included; this handler
shows "KeyboardInterrupt: cancelled the call to slow.sleep on 2 ranks" instead, as the cell's
error. Any other `KeyboardInterrupt` is shown as IPython always shows it.

ipykernel runs each cell's code on the kernel's event loop, so every `fut.get()` in a cell would
warn that it blocks a running loop; a cell that blocks blocks that loop anyway, so the kernel's
loop is registered as one where blocking is expected (`quiet_blocking_on`).
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Any

from monarch._src.lowlevel import Interrupted, quiet_blocking_on

__all__ = ["install"]

logger = logging.getLogger(__name__)


def _show(shell: Any, etype: type[BaseException], value: BaseException,
          tb: TracebackType | None, tb_offset: int | None = None) -> list[str] | None:
    if isinstance(value, Interrupted):
        stb = [f"KeyboardInterrupt: {value}"]
        shell._showtraceback(etype, value, stb)  # IPython's (and ipykernel's) display of an error
        return stb
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    return None


def install(shell: Any) -> None:
    """Show interrupted monarch waits in one line in `shell` (unless another custom exception
    handler is installed there already, which is left alone); no in-loop warning for a blocking
    read on the kernel's loop (when called from a cell, where that loop runs)."""
    try:
        quiet_blocking_on(asyncio.get_running_loop())
    except RuntimeError:  # a terminal IPython: sync cells run with no loop, nothing to quiet
        pass
    if shell.custom_exceptions not in ((), (KeyboardInterrupt,)):
        logger.info("monarch: IPython has a custom exception handler; interrupted calls will "
                    "show IPython's usual traceback")
        return
    shell.set_custom_exc((KeyboardInterrupt,), _show)
