"""Channel transports: the enum Monarch exposes and the strings users may write instead.

`enable_transport(...)` and the `default_transport` config key both take either a
`ChannelTransport` member or a string. Keyword strings ("tcp", "ipc", ...) map to members; an
explicit listen address ("tcp://host:port", "tls://host:port") is kept as a string because it
carries information (the address) that no member can hold.

What each member does here: `Unix` ("unix", "ipc"): unix-domain sockets between the client and
the procs on its host; `TcpWithLocalhost` (the default, "tcp-localhost"): loopback TCP;
`TcpWithHostname` ("tcp"): TCP on this machine's routable address, reachable by remote hosts;
`Tls` ("tls"): TCP with mutual TLS (needs the tls_* files). `Local` ("local", "inproc"; procs
are separate processes) and Meta's internal `MetaTls*` transports cannot work here. Their words
are refused with a ValueError saying what to use (Meta's Monarch refuses the words too); their
members are kept and read back by the `default_transport` key (as on Meta's Monarch, where code
sets and reads them on machines that cannot use them) and refused when the runtime would listen
(`check_usable`); `enable_transport` refuses them at once.
"""

from __future__ import annotations

import enum

__all__ = ["ChannelTransport", "check_usable", "parse_transport"]


class ChannelTransport(enum.Enum):
    """How procs reach each other. Members pickle by value, so they cross process boundaries."""

    Unix = "unix"
    TcpWithLocalhost = "tcp-localhost"
    TcpWithHostname = "tcp"
    MetaTlsWithHostname = "metatls-hostname"
    MetaTlsWithIpV6 = "metatls"
    Tls = "tls"
    Local = "local"

    def __repr__(self) -> str:
        return f"ChannelTransport.{self.name}"


# Keyword spellings accepted by `parse_transport`, in the order error messages list them.
_KEYWORDS: dict[str, ChannelTransport] = {
    "tcp": ChannelTransport.TcpWithHostname,
    "tcp-localhost": ChannelTransport.TcpWithLocalhost,
    "ipc": ChannelTransport.Unix,
    "unix": ChannelTransport.Unix,
    "tls": ChannelTransport.Tls,
}

# Transports Meta's Monarch knows that cannot work here, with what to use instead.
_REFUSED: dict[str, str] = {
    "metatls": "MetaTLS is Meta's internal TLS transport",
    "metatls-hostname": "MetaTLS is Meta's internal TLS transport",
    "local": "procs are separate OS processes, which an in-process channel cannot reach",
    "inproc": "procs are separate OS processes, which an in-process channel cannot reach",
}
_REFUSED_MEMBERS: dict[ChannelTransport, str] = {
    ChannelTransport.MetaTlsWithHostname: "metatls-hostname",
    ChannelTransport.MetaTlsWithIpV6: "metatls",
    ChannelTransport.Local: "local",
}


def _refused(value: object, word: str) -> ValueError:
    return ValueError(
        f"Transport {value!r} is not available in this implementation: {_REFUSED[word]}. "
        f"Use 'tls' (ChannelTransport.Tls, with enable_tls and the tls_* files) for encrypted "
        f"connections, 'unix' for procs on this host, or 'tcp' to reach remote hosts."
    )

# Schemes whose explicit "scheme://host:port" (or "unix:///path") form is kept verbatim.
_ADDRESS_SCHEMES: tuple[str, ...] = ("tcp", "tls", "unix")


def _accepted_forms() -> str:
    keywords = ", ".join(repr(word) for word in _KEYWORDS)
    addresses = ", ".join(f"'{scheme}://host:port'" for scheme in _ADDRESS_SCHEMES[:2])
    addresses += ", 'unix:///path'"
    return f"{keywords}, or an explicit address such as {addresses}"


def _invalid(value: str, why: str) -> ValueError:
    return ValueError(
        f"Invalid transport {value!r}: {why}. "
        f"Use a ChannelTransport member or one of {_accepted_forms()}."
    )


def _check_address(value: str, rest: str) -> None:
    """Validate the "host:port" part of an explicit address; IPv6 hosts are bracketed."""
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        raise _invalid(value, "the address needs the form host:port")
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise _invalid(value, "an IPv6 host must be written as [addr]")
    elif ":" in host:
        raise _invalid(value, "an IPv6 host must be written as [addr]")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise _invalid(value, f"port {port!r} is not a number between 0 and 65535")


def check_usable(value: object) -> None:
    """Raise ValueError saying what to use when `value` is a transport that cannot work here."""
    if isinstance(value, ChannelTransport) and value in _REFUSED_MEMBERS:
        raise _refused(value, _REFUSED_MEMBERS[value])


def parse_transport(
    value: ChannelTransport | str, *, usable_only: bool = True
) -> ChannelTransport | str:
    """Return the member for a keyword, the address itself for "tcp://h:p", or raise ValueError.

    Keywords are matched case-insensitively after stripping whitespace; addresses are returned
    stripped but otherwise untouched. Transports that cannot work here raise ValueError; their
    members pass when `usable_only` is False (the config key keeps them; `check_usable` refuses
    them at use).
    """
    if isinstance(value, ChannelTransport):
        if usable_only:
            check_usable(value)
        return value
    if not isinstance(value, str):
        raise TypeError(
            f"A transport must be a ChannelTransport or a str, got {type(value).__name__}."
        )
    text = value.strip()
    if text.lower() in _REFUSED:
        raise _refused(value, text.lower())
    member = _KEYWORDS.get(text.lower())
    if member is not None:
        return member
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme.lower() not in _ADDRESS_SCHEMES:
            raise _invalid(value, f"scheme {scheme!r} is not supported")
        if scheme.lower() == "unix":
            if not rest.startswith("/"):
                raise _invalid(value, "a unix address is 'unix:///absolute/path' (abstract "
                                      "'@name' sockets are not supported)")
            return text
        _check_address(value, rest)
        return text
    raise _invalid(value, "it is neither a known keyword nor an address")
