"""Waiting for a process to exit without polling: its pidfd turns readable when it does."""

from __future__ import annotations

import os
import select


def exits(pid: int, timeout: float) -> bool:
    """Wait until process `pid` (any process, not only a child) exits; False after `timeout`
    seconds. A pid that does not exist has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)
