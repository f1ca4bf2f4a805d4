"""The layered config store and the runtime's fast accessors.

Layers, lowest first: defaults (the registry) < config file < environment < runtime (values set
from Python). The merged view is rebuilt on every write and published by rebinding one attribute,
so readers take no lock and never see half an update: `get` is a single dict lookup. Writes are
rare (configuration, tests), so paying a full merge per write is the right trade; the rejected
alternative, resolving the layers on every `get`, would tax every message the runtime sends.

The file and environment layers are read lazily on the first access, not at import, so that
`import monarch.config` stays cheap and a malformed environment variable surfaces as an error
from the first config call rather than from an import. `reload()` reads them again.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from monarch._src.config.duration import parse_duration_seconds
from monarch._src.config.registry import KEYS, lookup, unknown_key_error
from monarch._src.config.sources import read_config_file, read_environment
from monarch._src.config.spec import Kind
from monarch._src.config.validate import check_value

__all__ = ["STORE", "ConfigStore"]


class _View(NamedTuple):
    """One published merge of all layers. Never mutated after construction."""

    values: dict[str, object]
    # Parsed seconds for every duration key, so timeouts cost no parsing on the hot path.
    seconds: dict[str, float]


def _under_ipython() -> bool:
    """True inside an IPython shell or kernel; checked without importing IPython."""
    module = sys.modules.get("IPython")
    get_ipython = getattr(module, "get_ipython", None)
    return callable(get_ipython) and get_ipython() is not None


def _defaults() -> dict[str, object]:
    values = {name: key.default for name, key in KEYS.items()}
    if _under_ipython():
        # Notebook users cannot see child procs' terminals, so forward their output by default.
        values["enable_log_forwarding"] = True
    return values


class ConfigStore:
    """Holds the layers of one process. `STORE` is the process-global instance."""

    def __init__(self) -> None:
        # Serializes writers; readers use `_view` without it.
        self._lock = threading.RLock()
        self._defaults: dict[str, object] = {}
        self._file: dict[str, object] = {}
        self._env: dict[str, object] = {}
        self._runtime: dict[str, object] = {}
        # None until the outside layers have been read; afterwards always the merge of all layers.
        self._view: _View | None = None

    # -- reading ---------------------------------------------------------------------------

    def _current(self) -> _View:
        view = self._view
        if view is None:
            with self._lock:
                if self._view is None:
                    self._load(os.environ)
                view = self._view
                assert view is not None  # _load publishes a view or raises.
        return view

    def get(self, key: str) -> Any:
        """Merged value of `key`; ValueError (with suggestions) if the key does not exist."""
        view = self._view
        if view is None:
            view = self._current()
        try:
            return view.values[key]
        except KeyError:
            raise unknown_key_error(key) from None

    def duration_seconds(self, key: str) -> float:
        """Merged value of duration key `key`, in seconds."""
        view = self._view
        if view is None:
            view = self._current()
        try:
            return view.seconds[key]
        except KeyError:
            if lookup(key).kind is not Kind.DURATION:
                raise TypeError(f"Config key {key!r} is not a duration.") from None
            raise

    def merged(self) -> dict[str, object]:
        """A fresh copy of the merged values; changing it changes nothing."""
        return dict(self._current().values)

    def runtime(self) -> dict[str, object]:
        """A fresh copy of the runtime layer."""
        self._current()
        with self._lock:
            return dict(self._runtime)

    # -- writing ---------------------------------------------------------------------------

    def update_runtime(self, values: Mapping[str, object]) -> None:
        """Validate every value, then merge them into the runtime layer (all or nothing)."""
        checked = {name: check_value(lookup(name), value) for name, value in values.items()}
        self._current()
        with self._lock:
            self._runtime.update(checked)
            self._publish()

    def replace_runtime(self, values: Mapping[str, object]) -> None:
        """Validate every value, then make them the whole runtime layer (all or nothing)."""
        checked = {name: check_value(lookup(name), value) for name, value in values.items()}
        self._current()
        with self._lock:
            self._runtime = checked
            self._publish()

    def reload(self, environ: Mapping[str, str] | None = None) -> None:
        """Re-read the defaults, config file and environment (default: os.environ) now.

        The runtime layer is kept. On error the previous layers stay in force.
        """
        with self._lock:
            self._load(os.environ if environ is None else environ)

    def _load(self, environ: Mapping[str, str]) -> None:
        file_layer = read_config_file(environ)
        env_layer = read_environment(environ)
        self._defaults = _defaults()
        self._file = file_layer
        self._env = env_layer
        self._publish()

    def _publish(self) -> None:
        values = {**self._defaults, **self._file, **self._env, **self._runtime}
        seconds = {
            name: parse_duration_seconds(value)
            for name, value in values.items()
            if KEYS[name].kind is Kind.DURATION and isinstance(value, str)
        }
        self._view = _View(values, seconds)


STORE = ConfigStore()
