"""Resolving a host name to an address other hosts can dial (torchmonarch's
`monarch.tools.network`).

`get_ipaddr(host, port)` asks the resolver for a stream socket address of `host`: IPv6 first,
then IPv4, unless `addr_type` asks for one family. Link-local addresses (IPv6 `fe80::/10`, IPv4
`169.254.0.0/16`) are skipped: they only work on one link (IPv6 ones need a scope id too), so a
peer on another host could not dial them. `get_sockaddr(host, port)` gives the same address
with the port, bracketed for IPv6 (`[::1]:8080`), as a URL or a `tcp://` address wants it.
"""

from __future__ import annotations

import enum
import ipaddress
import socket

__all__ = ["AddrType", "get_ipaddr", "get_sockaddr"]


class AddrType(enum.Enum):
    """Which address family `get_ipaddr` may return."""

    IPv4 = socket.AF_INET
    IPv6 = socket.AF_INET6
    Default = socket.AF_UNSPEC  # IPv6 when there is a usable one, else IPv4


def _usable(family: socket.AddressFamily, hostname: str, port: int) -> str | None:
    """The first address of `family` the resolver gives for `hostname` that is not link-local
    (None when it gives none)."""
    try:
        infos = socket.getaddrinfo(hostname, port, family=family, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return None
    for info in infos:
        addr = str(info[4][0]).split("%", 1)[0]  # an IPv6 scope id ("fe80::1%eth0") is dropped
        if not ipaddress.ip_address(addr).is_link_local:
            return addr
    return None


def get_ipaddr(hostname: str, port: int, addr_type: AddrType = AddrType.Default) -> str:
    """An address of `hostname` that other hosts can dial (see the module docstring); raises
    `RuntimeError` when the resolver gives none of the asked family."""
    if not isinstance(addr_type, AddrType):
        raise TypeError(f"get_ipaddr: addr_type must be a network.AddrType, got {addr_type!r}.")
    families = ([socket.AF_INET6, socket.AF_INET] if addr_type is AddrType.Default
                else [socket.AddressFamily(addr_type.value)])
    for family in families:
        addr = _usable(family, hostname, port)
        if addr is not None:
            return addr
    asked = "IPv6 or IPv4" if addr_type is AddrType.Default else addr_type.name
    raise RuntimeError(
        f"No {asked} address of {hostname!r} that another host could dial (link-local "
        "addresses are skipped). Check the host's name resolution (/etc/hosts, DNS), or pass "
        "an address instead of the name."
    )


def get_sockaddr(hostname: str, port: int) -> str:
    """`address:port` for `hostname` (`[address]:port` for IPv6), from `get_ipaddr`."""
    addr = get_ipaddr(hostname, port)
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
