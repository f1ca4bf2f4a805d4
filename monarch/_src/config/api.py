"""The public configuration functions, all acting on the process-global store.

Everything here changes only the runtime layer, the top of defaults < config file < environment <
runtime. The runtime layer is process-global, not thread-local: `configured` in one thread is seen
by every thread until it exits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from monarch._src.config.store import STORE

__all__ = [
    "clear_runtime_config",
    "configure",
    "configured",
    "get_global_config",
    "get_runtime_config",
]


def configure(**values: object) -> None:
    """Set keys in the runtime layer; they override the file, the environment and defaults.

    Every value is checked before any is applied, so a failed call changes nothing. An unknown
    key raises ValueError (with the closest valid names); a value of the wrong type raises
    TypeError; a string that is not a valid transport raises ValueError. Durations are stored in
    canonical form ("90s" reads back as "1m 30s").
    """
    STORE.update_runtime(values)


@contextmanager
def configured(**overrides: object) -> Iterator[dict[str, object]]:
    """Apply `overrides` for the duration of the block, yielding the merged config.

    On exit (also on exception) the runtime layer is cleared and the snapshot taken on entry is
    reapplied, so keys set inside the block by other means are undone too. Invalid overrides raise
    before the block runs and change nothing.
    """
    snapshot = STORE.runtime()
    STORE.update_runtime(overrides)
    try:
        yield STORE.merged()
    finally:
        STORE.replace_runtime(snapshot)


def get_global_config() -> dict[str, object]:
    """Return the merged value of every key, as a fresh dict that may be mutated freely."""
    return STORE.merged()


def get_runtime_config() -> dict[str, object]:
    """Return only the keys set from Python (the runtime layer), as a fresh dict."""
    return STORE.runtime()


def clear_runtime_config() -> None:
    """Drop every runtime setting, so the file, the environment and defaults apply again."""
    STORE.replace_runtime({})
