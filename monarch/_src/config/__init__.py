"""Configuration: a registry of typed keys resolved through four layers.

defaults (`registry.py`) < config file named by MONARCH_CONFIG_FILE < environment
(HYPERACTOR_*, HYPERACTOR_MESH_*, MONARCH_*) < runtime layer (`configure`). The public face is
`monarch.config`; the runtime uses the internal accessors re-exported here:

* `get(key)` and `duration_seconds(key)`: lock-free reads of the merged view (hot path).
* `runtime_snapshot()` / `apply_snapshot(values)`: ship the controller's runtime layer to child
  procs, where it replaces the child's runtime layer.
* `reload()`: re-read the config file and the environment (tests, after changing os.environ).
"""

from __future__ import annotations

from collections.abc import Mapping

from monarch._src.config.api import (
    clear_runtime_config,
    configure,
    configured,
    get_global_config,
    get_runtime_config,
)
from monarch._src.config.encoding import Encoding
from monarch._src.config.parametrize import parametrize_config, parametrize_config_pointwise
from monarch._src.config.store import STORE
from monarch._src.config.transport import ChannelTransport, check_usable, parse_transport

__all__ = [
    "ChannelTransport",
    "Encoding",
    "apply_snapshot",
    "check_usable",
    "clear_runtime_config",
    "configure",
    "configured",
    "duration_seconds",
    "get",
    "get_global_config",
    "get_runtime_config",
    "parametrize_config",
    "parametrize_config_pointwise",
    "parse_transport",
    "reload",
    "runtime_snapshot",
]

# Bound methods of the global store: one attribute lookup fewer on the runtime's hot path.
get = STORE.get
duration_seconds = STORE.duration_seconds


def runtime_snapshot() -> dict[str, object]:
    """The runtime layer as a picklable dict, for `apply_snapshot` in another process."""
    return STORE.runtime()


def apply_snapshot(values: Mapping[str, object]) -> None:
    """Make `values` (validated) the whole runtime layer of this process."""
    STORE.replace_runtime(values)


def reload() -> None:
    """Re-read the config file and os.environ; the runtime layer is kept."""
    STORE.reload()
