"""The `[actor=<name>] ` prefix on Python log records emitted inside actors and on the client.

A log record factory (not a handler or formatter, so it holds whatever handlers the user
configures) prefixes each record's message with the running actor's name, `<root>` on the
client, when `prefix_python_logs_with_actor` is on (`monarch.actor.config`). Empty messages are
left alone: structured loggers rely on them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from monarch._src.config import get as config_get
from monarch._src.mesh import context

__all__ = ["install_log_prefix"]

_installed = False
_lock = threading.Lock()


def _actor_name() -> str:
    instance = getattr(context._tls, "instance", None)
    return "<root>" if instance is None else str(instance)


def install_log_prefix() -> None:
    """Install the prefixing record factory once per process."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if record.msg and isinstance(record.msg, str) and config_get(
                "prefix_python_logs_with_actor"
            ):
                record.msg = f"[actor={_actor_name()}] {record.msg}"
            return record

        logging.setLogRecordFactory(factory)
