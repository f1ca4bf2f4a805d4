"""Checking and converting config values, one rule per `Kind`.

Values set from Python (`configure`, snapshots) are checked strictly: a wrong type is a
`TypeError` naming the key, the expected type and the type received; nothing is coerced except an
int given for a float. Values read from text (environment variables) or TOML are parsed into the
same Python types first and then go through the same strict check, so every layer holds values of
one canonical form.
"""

from __future__ import annotations

from monarch._src.config.duration import normalize_duration
from monarch._src.config.encoding import Encoding
from monarch._src.config.spec import ConfigKey, Kind
from monarch._src.config.transport import ChannelTransport, parse_transport

__all__ = ["check_value", "expected_type", "parse_text", "parse_toml"]

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def expected_type(key: ConfigKey) -> str:
    """Human-readable description of what `key` accepts, for error messages."""
    match key.kind:
        case Kind.DURATION:
            text = "str (a duration such as '30s')"
        case Kind.INT:
            text = "int"
        case Kind.BOOL:
            text = "bool"
        case Kind.FLOAT:
            text = "float"
        case Kind.STR:
            text = "str"
        case Kind.ENCODING:
            text = "Encoding"
        case Kind.TRANSPORT:
            text = "ChannelTransport or str"
        case Kind.SLICE:
            text = "slice"
    return f"{text} or None" if key.nullable else text


def _wrong_type(key: ConfigKey, value: object) -> TypeError:
    return TypeError(
        f"Config key {key.name!r} expects {expected_type(key)}, "
        f"got {type(value).__name__} {value!r}."
    )


def _check_slice(key: ConfigKey, value: slice) -> slice:
    bounds_ok = all(b is None or (isinstance(b, int) and not isinstance(b, bool))
                    for b in (value.start, value.stop))
    if not bounds_ok or value.step is not None:
        raise TypeError(
            f"Config key {key.name!r} expects a slice with int bounds and no step, got {value!r}."
        )
    return value


def check_value(key: ConfigKey, value: object) -> object:
    """Return `value` in canonical form or raise TypeError/ValueError naming `key`."""
    if value is None and key.nullable:
        return None
    value = _check_kind(key, value)
    return value if key.check is None else key.check(value)


def _check_kind(key: ConfigKey, value: object) -> object:
    match key.kind:
        case Kind.DURATION:
            if not isinstance(value, str):
                raise _wrong_type(key, value)
            try:
                return normalize_duration(value)
            except TypeError as exc:
                raise TypeError(f"Config key {key.name!r}: {exc}") from exc
        case Kind.INT:
            if isinstance(value, bool) or not isinstance(value, int):
                raise _wrong_type(key, value)
            return int(value)
        case Kind.BOOL:
            if not isinstance(value, bool):
                raise _wrong_type(key, value)
            return value
        case Kind.FLOAT:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _wrong_type(key, value)
            return float(value)
        case Kind.STR:
            if not isinstance(value, str):
                raise _wrong_type(key, value)
            return value
        case Kind.ENCODING:
            if not isinstance(value, Encoding):
                raise _wrong_type(key, value)
            return value
        case Kind.TRANSPORT:
            if not isinstance(value, (ChannelTransport, str)):
                raise _wrong_type(key, value)
            try:
                return parse_transport(value, usable_only=False)
            except ValueError as exc:
                raise ValueError(f"Config key {key.name!r}: {exc}") from exc
        case Kind.SLICE:
            if not isinstance(value, slice):
                raise _wrong_type(key, value)
            return _check_slice(key, value)


def _parse_bool(key: ConfigKey, text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(
        f"Config key {key.name!r} expects a boolean word "
        f"(1/0, true/false, yes/no, on/off), got {text!r}."
    )


def _parse_number(key: ConfigKey, text: str, kind: type[int | float]) -> int | float:
    try:
        return kind(text.strip())
    except ValueError as exc:
        raise ValueError(
            f"Config key {key.name!r} expects {kind.__name__}, got {text!r}."
        ) from exc


def _parse_encoding(key: ConfigKey, text: str) -> Encoding:
    word = text.strip().lower()
    for member in Encoding:
        if word in (member.name.lower(), member.value):
            return member
    names = ", ".join(member.name for member in Encoding)
    raise ValueError(f"Config key {key.name!r} expects one of {names}, got {text!r}.")


def _parse_slice(key: ConfigKey, text: str) -> slice:
    """Accept Rust's "start..end" and Python's "start:end"; either bound may be omitted."""
    body = text.strip()
    separator = ".." if ".." in body else ":"
    start, sep, stop = body.partition(separator)
    try:
        if not sep:
            raise ValueError(body)
        bounds = [int(part) if part.strip() else None for part in (start, stop)]
    except ValueError as exc:
        raise ValueError(
            f"Config key {key.name!r} expects a range such as '26600..26610', got {text!r}."
        ) from exc
    return slice(bounds[0], bounds[1])


def parse_text(key: ConfigKey, text: str) -> object:
    """Parse an environment-variable string for `key`; an empty string means None if nullable."""
    if key.nullable and not text.strip():
        return None
    value: object
    match key.kind:
        case Kind.DURATION | Kind.STR | Kind.TRANSPORT:
            value = text
        case Kind.INT:
            value = _parse_number(key, text, int)
        case Kind.BOOL:
            value = _parse_bool(key, text)
        case Kind.FLOAT:
            value = _parse_number(key, text, float)
        case Kind.ENCODING:
            value = _parse_encoding(key, text)
        case Kind.SLICE:
            value = _parse_slice(key, text)
    return check_value(key, value)


def parse_toml(key: ConfigKey, value: object) -> object:
    """Convert a TOML value for `key`: enums and ranges may be written as strings, a range also
    as a two-element array; everything else must already have the key's type."""
    if isinstance(value, str) and key.kind in (Kind.ENCODING, Kind.SLICE):
        return parse_text(key, value)
    if isinstance(value, list) and key.kind is Kind.SLICE and len(value) == 2:
        return check_value(key, slice(value[0], value[1]))
    return check_value(key, value)
