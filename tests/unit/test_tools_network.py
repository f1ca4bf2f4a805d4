"""monarch.tools.network: a host name to an address other hosts can dial (resolver faked)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from monarch.tools import network

pytestmark = pytest.mark.timeout(30)


def _resolver(answers: dict[int, list[str]]) -> Any:
    """A getaddrinfo that answers each family with its addresses (none: the resolver's error)."""
    calls: list[int] = []

    def getaddrinfo(host: str, port: int, family: int = 0, type: int = 0) -> list[Any]:
        calls.append(family)
        addrs = answers.get(family)
        if not addrs:
            raise socket.gaierror(f"no {family} address for {host}")
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                 (a, port, 0, 0) if family == socket.AF_INET6 else (a, port)) for a in addrs]

    getaddrinfo.calls = calls  # type: ignore[attr-defined]
    return getaddrinfo


def test_ipv6_first_then_ipv4(monkeypatch: pytest.MonkeyPatch) -> None:
    both = _resolver({socket.AF_INET6: ["2001:db8::5"], socket.AF_INET: ["192.0.2.7"]})
    monkeypatch.setattr(socket, "getaddrinfo", both)
    assert network.get_ipaddr("h", 80) == "2001:db8::5"
    assert network.get_sockaddr("h", 80) == "[2001:db8::5]:80"
    assert network.get_ipaddr("h", 80, network.AddrType.IPv4) == "192.0.2.7"
    v4_only = _resolver({socket.AF_INET: ["192.0.2.7"]})
    monkeypatch.setattr(socket, "getaddrinfo", v4_only)
    assert network.get_sockaddr("h", 80) == "192.0.2.7:80"
    assert v4_only.calls == [socket.AF_INET6, socket.AF_INET]


def test_link_local_addresses_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", _resolver({
        socket.AF_INET6: ["fe80::1%eth0", "fe80::2"],
        socket.AF_INET: ["169.254.3.4", "198.51.100.9"],
    }))
    assert network.get_ipaddr("h", 80) == "198.51.100.9"  # past both kinds of link-local
    monkeypatch.setattr(socket, "getaddrinfo", _resolver({socket.AF_INET6: ["fe80::1"]}))
    with pytest.raises(RuntimeError, match=r"No IPv6 or IPv4 address of 'h' that another host"):
        network.get_ipaddr("h", 80)
    with pytest.raises(RuntimeError, match="No IPv6 address"):
        network.get_ipaddr("h", 80, network.AddrType.IPv6)


def test_a_wrong_addr_type_is_refused() -> None:
    with pytest.raises(TypeError, match="addr_type must be a network.AddrType"):
        network.get_ipaddr("h", 80, "ipv4")  # type: ignore[arg-type]


def test_this_machines_name_resolves() -> None:
    assert network.get_sockaddr("localhost", 8080).endswith(":8080")
