"""torchmonarch's `monarch_hyperactor.channel`: `ChannelTransport` and `BindSpec`.

`ChannelTransport` is `monarch.config`'s enum. A `BindSpec` names how a server binds: a
transport member ("any address of that kind") or an explicit `scheme://address` string. The
`default_transport` config value is that member or string, and a `BindSpec` equals it, so
`config["default_transport"] == BindSpec(ChannelTransport.Unix)` holds as on Monarch.
"""

from __future__ import annotations

from monarch._src.config.transport import ChannelTransport, parse_transport

__all__ = ["BindSpec", "ChannelAddr", "ChannelTransport"]


class BindSpec:
    """How to bind a channel server: a `ChannelTransport` member or a `scheme://addr` URL."""

    __slots__ = ("_spec",)

    def __init__(self, spec: ChannelTransport | str) -> None:
        if not isinstance(spec, (ChannelTransport, str)):
            raise TypeError(
                "BindSpec takes a ChannelTransport or an address string, "
                f"not {type(spec).__name__}."
            )
        # Members are kept as given (Local and MetaTls* included: a spec names them even where
        # binding them is refused); strings are normalized as `default_transport` does.
        self._spec: ChannelTransport | str = (
            spec if isinstance(spec, ChannelTransport) else parse_transport(spec)
        )

    @property
    def spec(self) -> ChannelTransport | str:
        """The transport member, or the explicit address."""
        return self._spec

    def __str__(self) -> str:
        return self._spec if isinstance(self._spec, str) else self._spec.value

    def __repr__(self) -> str:
        return f"BindSpec({self._spec!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BindSpec):
            return self._spec == other._spec
        if isinstance(other, ChannelTransport):
            return self._spec == other
        if isinstance(other, str):
            try:
                return self._spec == parse_transport(other)
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._spec)


class ChannelAddr:
    """Channel addresses."""

    @staticmethod
    def any(transport: ChannelTransport) -> str:
        """The "any port" listen address of `transport` on this host."""
        if transport is ChannelTransport.TcpWithLocalhost:
            return "tcp://127.0.0.1:0"
        if transport is ChannelTransport.TcpWithHostname:
            return "tcp://0.0.0.0:0"
        if transport is ChannelTransport.Tls:
            return "tls://0.0.0.0:0"
        raise ValueError(
            f"{transport!r} has no 'any' address here. Use ChannelTransport.TcpWithLocalhost, "
            "TcpWithHostname or Tls."
        )
