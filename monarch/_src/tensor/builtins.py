"""`monarch.builtins`: small remote functions every mesh can run."""

from __future__ import annotations

import logging
from typing import Any

from monarch._src.tensor.remote import remote

__all__ = ["log_remote", "set_logging_level_remote"]


def _log(*args: Any, level: int = logging.WARNING, **kwargs: Any) -> None:
    logging.getLogger("monarch.builtins").log(level, *args, **kwargs)


def _set_level(level: int) -> None:
    logging.getLogger().setLevel(level)


log_remote = remote(f"{__name__}._log", propagate=lambda *a, **k: None)
set_logging_level_remote = remote(f"{__name__}._set_level", propagate=lambda level: None)
