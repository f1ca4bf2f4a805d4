"""torchmonarch's `monarch_hyperactor.proc`: `ActorAddr`, the address of one actor.

An `ActorAddr` is a value: the channel address of the proc, the proc's name and the actor's
name. It prints as `addr,proc_name,actor_name` and `from_string` reads that form back.
"""

from __future__ import annotations

__all__ = ["ActorAddr"]


class ActorAddr:
    """A unique reference to an actor: its proc's channel address, the proc's name and the
    actor's name."""

    __slots__ = ("_actor_name", "_addr", "_proc_name")

    def __init__(self, *, addr: str, proc_name: str, actor_name: str) -> None:
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
    def proc_id(self) -> str:
        return f"{self._addr},{self._proc_name}"

    @property
    def is_root(self) -> bool:
        return self._actor_name in ("root", "client")

    @staticmethod
    def from_string(actor_addr_str: str) -> ActorAddr:
        """Parse the `addr,proc_name,actor_name` form `str()` prints."""
        parts = actor_addr_str.rsplit(",", 2)
        if len(parts) != 3 or not all(parts):
            raise ValueError(
                f"Invalid actor address {actor_addr_str!r}. "
                "Expected the form 'addr,proc_name,actor_name'."
            )
        return ActorAddr(addr=parts[0], proc_name=parts[1], actor_name=parts[2])

    def _key(self) -> tuple[str, str, str]:
        return (self._addr, self._proc_name, self._actor_name)

    def __str__(self) -> str:
        return ",".join(self._key())

    def __repr__(self) -> str:
        return f"ActorAddr({self})"

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorAddr) and self._key() == other._key()

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (ActorAddr.from_string, (str(self),))
