"""Where the debug controller's terminal server listens: the environment variables and their
defaults (stdlib only, so the `monarch` CLI reads them without loading the runtime)."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_PROTOCOL", "HOST_ENV", "PORT_ENV",
           "PROTOCOL_ENV", "debug_server_address"]

HOST_ENV = "MONARCH_DEBUG_SERVER_HOST"
PORT_ENV = "MONARCH_DEBUG_SERVER_PORT"
PROTOCOL_ENV = "MONARCH_DEBUG_SERVER_PROTOCOL"
DEFAULT_HOST = "localhost"
DEFAULT_PORT = 27000
DEFAULT_PROTOCOL = "tcp"


def debug_server_address() -> tuple[str, int]:
    """(host, port) of the controller's terminal server, from the environment."""
    host = os.environ.get(HOST_ENV) or DEFAULT_HOST
    raw = os.environ.get(PORT_ENV) or str(DEFAULT_PORT)
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{PORT_ENV} must be a port number, got {raw!r}.") from None
    return host, port
