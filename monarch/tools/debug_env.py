"""torchmonarch's `monarch.tools.debug_env`: where the debug controller's terminal server
listens (`MONARCH_DEBUG_SERVER_HOST`, `_PORT`, `_PROTOCOL`) and the defaults."""

from __future__ import annotations

import os

from monarch._src.debug.env import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_PROTOCOL,
    HOST_ENV,
    PORT_ENV,
    PROTOCOL_ENV,
)

__all__ = [
    "_MONARCH_DEBUG_SERVER_HOST_DEFAULT",
    "_MONARCH_DEBUG_SERVER_HOST_ENV_VAR",
    "_MONARCH_DEBUG_SERVER_PORT_DEFAULT",
    "_MONARCH_DEBUG_SERVER_PORT_ENV_VAR",
    "_MONARCH_DEBUG_SERVER_PROTOCOL_DEFAULT",
    "_MONARCH_DEBUG_SERVER_PROTOCOL_ENV_VAR",
    "_get_debug_server_host",
    "_get_debug_server_port",
    "_get_debug_server_protocol",
]

_MONARCH_DEBUG_SERVER_HOST_ENV_VAR = HOST_ENV
_MONARCH_DEBUG_SERVER_HOST_DEFAULT = DEFAULT_HOST
_MONARCH_DEBUG_SERVER_PORT_ENV_VAR = PORT_ENV
_MONARCH_DEBUG_SERVER_PORT_DEFAULT = str(DEFAULT_PORT)
_MONARCH_DEBUG_SERVER_PROTOCOL_ENV_VAR = PROTOCOL_ENV
_MONARCH_DEBUG_SERVER_PROTOCOL_DEFAULT = DEFAULT_PROTOCOL


def _get_debug_server_host() -> str:
    return os.environ.get(HOST_ENV, DEFAULT_HOST)


def _get_debug_server_port() -> str:
    return os.environ.get(PORT_ENV, str(DEFAULT_PORT))


def _get_debug_server_protocol() -> str:
    return os.environ.get(PROTOCOL_ENV, _MONARCH_DEBUG_SERVER_PROTOCOL_DEFAULT)
