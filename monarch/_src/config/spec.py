"""The shape of a config key: its name, value kind, default, environment names and meaning."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["ConfigKey", "Kind", "Namespace", "env_names_for"]


class Kind(enum.Enum):
    """What values a key holds; `validate.py` knows how to check and parse each kind."""

    DURATION = "duration"  # humantime string, stored in canonical form ("90s" -> "1m 30s")
    INT = "int"  # int, never bool
    BOOL = "bool"
    FLOAT = "float"  # float; an int is accepted and widened
    STR = "str"
    ENCODING = "Encoding"  # an Encoding member
    TRANSPORT = "ChannelTransport"  # a ChannelTransport member or an explicit address string
    SLICE = "slice"  # a Python slice with int-or-None bounds and no step


class Namespace(enum.Enum):
    """Which Monarch component owns a key; decides its Monarch-compatible environment name."""

    HYPERACTOR = "HYPERACTOR_"  # HYPERACTOR_<KEY>
    MESH = "HYPERACTOR_MESH_"  # HYPERACTOR_MESH_<KEY without a leading "mesh_">
    MONARCH = "MONARCH_"  # only MONARCH_<KEY>


def env_names_for(name: str, namespace: Namespace) -> tuple[str, ...]:
    """Environment variables for a key, most authoritative first; MONARCH_<KEY> is always last.

    The Monarch-compatible name comes first so that an environment prepared for Meta's Monarch
    wins over our own spelling if both are set.
    """
    upper = name.upper()
    monarch_name = f"MONARCH_{upper}"
    match namespace:
        case Namespace.HYPERACTOR:
            primary = f"HYPERACTOR_{upper}"
        case Namespace.MESH:
            primary = f"HYPERACTOR_MESH_{upper.removeprefix('MESH_')}"
        case Namespace.MONARCH:
            return (monarch_name,)
    return (primary, monarch_name)


class ConfigKey(NamedTuple):
    """One registered key. Immutable and shared by every layer."""

    name: str
    kind: Kind
    # Already in canonical form (durations normalised); None only when `nullable`.
    default: object
    doc: str
    # Environment variables read by the environment layer, first set one wins.
    env_names: tuple[str, ...]
    # True when None is a legal value (it then means "not set / let the runtime decide").
    nullable: bool = False
    # Extra rule run on a value already of the right kind (and not None): returns the value to
    # store or raises ValueError naming the key. Keys with no meaning here warn that a value other
    # than the default changes nothing this way (see `registry.inert`).
    check: Callable[[object], object] | None = None
