"""torchmonarch's `monarch_hyperactor.proc`: `ActorAddr`, the address of one actor.

An `ActorAddr` is a value: the channel address of the proc, the proc's name and the actor's
name. It prints as Monarch's actor ids do, `actor.proc@location`, where the location is the
address written as a URL (`tcp:h:p` and `tcp://h:p` both print `tcp://h:p`; `local:N` prints
`inproc://N`, `unix:/path` prints `ipc:///path`), and `from_string` reads that form back.
"""

from __future__ import annotations

__all__ = ["ActorAddr", "location_of"]

# Monarch's address schemes (`scheme:rest`) and the scheme of the URL they print as.
_URL_SCHEMES = {"local": "inproc", "unix": "ipc"}
_ADDR_SCHEMES = {url: scheme for scheme, url in _URL_SCHEMES.items()}


def location_of(addr: str) -> str:
    """The URL form of channel address `addr` ('tcp:h:p' or 'tcp://h:p' -> 'tcp://h:p')."""
    scheme, sep, rest = addr.partition(":")
    if not sep or not scheme or not rest:
        raise ValueError(
            f"Invalid channel address {addr!r}: expected 'scheme:address' (e.g. "
            "'tcp:127.0.0.1:26600', 'unix:/path', 'local:0') or 'scheme://address'."
        )
    rest = rest.removeprefix("//")
    return f"{_URL_SCHEMES.get(scheme, scheme)}://{rest}"


def _label(kind: str, text: str, whole: str) -> str:
    if not text or "." in text or "@" in text:
        raise ValueError(
            f"Invalid actor id {whole!r}: the {kind} name {text!r} must be non-empty, without "
            "'.' or '@'. Expected the form 'actor.proc@scheme://address'."
        )
    return text


class ActorAddr:
    """A unique reference to an actor: its proc's channel address, the proc's name and the
    actor's name."""

    __slots__ = ("_actor_name", "_addr", "_proc_name")

    def __init__(self, *, addr: str, proc_name: str, actor_name: str) -> None:
        location_of(addr)  # checked now, as Monarch parses it
        self._addr = addr
        self._proc_name = proc_name
        self._actor_name = actor_name

    @property
    def addr(self) -> str:
        return self._addr

    @property
    def proc_name(self) -> str:
        return self._proc_name

    @property
    def actor_name(self) -> str:
        return self._actor_name

    @property
    def uid(self) -> str:
        """The actor's id within its proc (its name: every actor here is a root actor)."""
        return self._actor_name

    @property
    def pid(self) -> str:
        """The id of the root actor this actor descends from: itself here."""
        return self._actor_name

    @property
    def label(self) -> str:
        return self._actor_name

    @property
    def proc_label(self) -> str:
        return self._proc_name

    @property
    def proc_id(self) -> str:
        """The proc's id, `proc@location`."""
        return f"{self._proc_name}@{location_of(self._addr)}"

    @property
    def is_root(self) -> bool:
        """True: actors here are spawned on a proc, never as children inside another actor."""
        return True

    @staticmethod
    def from_string(actor_addr_str: str) -> ActorAddr:
        """Parse the `actor.proc@scheme://address` form `str()` prints."""
        ids, sep, location = actor_addr_str.partition("@")
        scheme, url_sep, rest = location.partition("://")
        actor, dot, proc = ids.partition(".")
        if not sep or not url_sep or not scheme or not rest or not dot:
            raise ValueError(
                f"Invalid actor id {actor_addr_str!r}. Expected the form "
                "'actor.proc@scheme://address' (e.g. 'trainer.worker_0@tcp://10.0.0.1:26600')."
            )
        return ActorAddr(
            addr=f"{_ADDR_SCHEMES.get(scheme, scheme)}:{rest}",
            proc_name=_label("proc", proc, actor_addr_str),
            actor_name=_label("actor", actor, actor_addr_str),
        )

    def _key(self) -> tuple[str, str, str]:
        return (location_of(self._addr), self._proc_name, self._actor_name)

    def __str__(self) -> str:
        return f"{self._actor_name}.{self._proc_name}@{location_of(self._addr)}"

    def __repr__(self) -> str:
        return f"ActorAddr({self})"

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorAddr) and self._key() == other._key()

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (ActorAddr.from_string, (str(self),))
