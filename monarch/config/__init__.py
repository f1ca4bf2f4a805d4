"""Monarch configuration (`monarch.config`).

Each key (see `get_global_config()` for all of them) resolves through four layers, later ones
winning: built-in defaults < a TOML file named by MONARCH_CONFIG_FILE < environment variables
(HYPERACTOR_<KEY>, HYPERACTOR_MESH_<KEY> and MONARCH_<KEY>) < the runtime layer, which is what
`configure` and `configured` change from Python. The runtime layer is process-global and is handed
to the procs a controller spawns.

Durations are humantime strings ("30s", "1m 30s", "500ms") and read back in canonical form.
"""

# ChannelTransport is importable from here for convenience (its public home is monarch.actor); the
# redundant alias marks it as an intended re-export although it is not in __all__.
from monarch._src.config import (
    ChannelTransport as ChannelTransport,
    Encoding,
    clear_runtime_config,
    configure,
    configured,
    get_global_config,
    get_runtime_config,
    parametrize_config,
    parametrize_config_pointwise,
)

__all__ = [
    "Encoding",
    "clear_runtime_config",
    "configure",
    "configured",
    "get_global_config",
    "get_runtime_config",
    "parametrize_config",
    "parametrize_config_pointwise",
]
