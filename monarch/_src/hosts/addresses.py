"""Worker addresses: parsing, loopback checks and the `ca` argument of the attach API.

A worker address is `tcp://host:port` (or `tls://host:port`, or bare `host:port`), or
`ipc:///path` (also `unix:///path`): a worker on this machine listening on a unix-domain socket
at that path, as Monarch's `ProcessJob` and `host_mesh_from_store` workers do; it parses to
`("unix", path, 0)` and is dialed as `unix:///path`. With `enable_tls` every connection is TLS,
so `tcp://` addresses are dialed (and listened on) as `tls://`: the same worker addresses work
with and without TLS (unix-domain sockets are not encrypted, so `ipc://` is refused then).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from monarch._src.config import get as config_get

__all__ = [
    "TRUST_ALL", "check_ca", "dial_address", "free_port", "host_of", "is_loopback",
    "parse_worker_address", "probe_ssl_context",
]

TRUST_ALL = "trust_all_connections"
_LOOPBACK_NAMES = ("localhost",)

def parse_worker_address(
    address: str, *, what: str = "attach_to_workers", wildcard: bool = False
) -> tuple[str, str, int]:
    """Split a worker address `tcp://host:port` (or `tls://`, or bare `host:port`) into
    (scheme, host, port), the scheme being `tls` whenever `enable_tls` is on; ValueError saying
    what is accepted otherwise. `wildcard` admits
    `0.0.0.0` (a worker listening on every interface), never a client's dial address.

    An alias `DIAL@BIND` (`tcp://10.0.0.5:26600@tcp://0.0.0.0:26600`, as on Monarch: a worker
    behind NAT advertises one address and binds another) gives its listening half with
    `wildcard` (the worker's side) and its dial half without (a client's); both are checked."""
    if not isinstance(address, str):
        raise TypeError(f"{what}: a worker address must be a str such as 'tcp://host:26600'; "
                        f"got {type(address).__name__} {address!r}.")
    text = address.strip()
    if "@" in text:
        dial, _, bind = text.partition("@")
        if "@" in bind:
            raise ValueError(f"{what}: worker address {address!r} has more than one '@'; an "
                             "alias is 'DIAL@BIND', e.g. 'tcp://10.0.0.5:26600@tcp://0.0.0.0:26600'.")
        parse_worker_address(dial if wildcard else bind, what=what, wildcard=not wildcard)
        return parse_worker_address(bind if wildcard else dial, what=what, wildcard=wildcard)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme in ("ipc", "unix"):
        return "unix", _socket_path(address, rest, what), 0
    if scheme not in ("tcp", "tls"):
        raise ValueError(
            f"{what}: worker address {address!r} uses the scheme {scheme!r}; this version "
            "connects hosts over 'tcp://host:port' (or 'tls://host:port' with enable_tls), or "
            "'ipc:///path' on this machine."
        )
    tls = bool(config_get("enable_tls"))
    if scheme == "tls" and not tls:
        raise ValueError(
            f"{what}: worker address {address!r} is tls:// but enable_tls is off: configure "
            "enable_tls with tls_ca_file, tls_cert_file and tls_key_file, or use tcp://."
        )
    scheme = "tls" if tls else scheme
    host, colon, port = rest.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"{what}: worker address {address!r} needs a host and a port, as in "
            "'tcp://10.0.0.5:26600'."
        )
    if host == "*" or (host in ("0.0.0.0", "::") and not wildcard):
        raise ValueError(
            f"{what}: worker address {address!r} is a wildcard; give the host's own address "
            "(the one clients dial)."
        )
    return scheme, host, int(port)


def _socket_path(address: str, path: str, what: str) -> str:
    """The socket path of an `ipc://` worker address, checked."""
    if not path.startswith("/"):
        raise ValueError(f"{what}: worker address {address!r} needs an absolute socket path, as "
                         "in 'ipc:///tmp/monarch/worker0' (abstract '@name' sockets are not "
                         "supported).")
    if len(path.encode()) > 107:  # sun_path holds 108 bytes, one of them the terminating NUL
        raise ValueError(f"{what}: the socket path of {address!r} is longer than 107 bytes; "
                         "choose a shorter one.")
    if config_get("enable_tls"):
        raise ValueError(f"{what}: worker address {address!r} is a unix-domain socket, which is "
                         "not encrypted, but enable_tls is on; use a tls:// address.")
    return path


def dial_address(scheme: str, host: str, port: int) -> str:
    """The transport address of a parsed worker address (`unix:///path` for `ipc://`)."""
    if scheme == "unix":
        return f"unix://{host}"
    return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"


def probe_ssl_context() -> Any:
    """With `enable_tls`, the client SSL context (our certificate) for probing whether a worker
    listens: a bare TCP probe of a TLS listener is logged as a failed handshake. Else None."""
    from monarch._src.transport.tls import tls_args

    args = tls_args()
    return None if args is None else args[0]["ssl_context"]


def is_loopback(host: str) -> bool:
    """True for `localhost` and addresses in 127.0.0.0/8 or ::1."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(address: str) -> str:
    """The host part of `scheme://host:port`, without IPv6 brackets."""
    rest = address.partition("://")[2] or address
    return rest.rpartition(":")[0].strip("[]")


def check_ca(ca: str, private_key: Any, what: str) -> None:
    """Only `ca="trust_all_connections"` without a private key is implemented."""
    if ca != TRUST_ALL or private_key is not None:
        raise NotImplementedError(
            f"{what}: only ca='{TRUST_ALL}' and private_key=None are supported; for "
            "encrypted, authenticated connections configure enable_tls with tls_ca_file, "
            "tls_cert_file and tls_key_file on every host and the client."
        )


def free_port(host: str = "") -> int:
    """A TCP port free on `host` ('' = every interface) right now, for a listener started next
    (a rendezvous, a worker); another process may still take it first."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
