"""Humantime durations: the string form every timeout-like config key uses.

A duration is one or more `<integer><unit>` items, optionally separated by whitespace ("1h30m",
"1h 30m", "500ms"). There are no fractions and no bare numbers: "30" is rejected because the unit
would be a guess. Values are kept as integer nanoseconds so that normalising never rounds.

`format_duration` writes the canonical form Monarch (through Rust's humantime crate) reads back:
largest unit first, zero items omitted, separated by single spaces ("300s" -> "5m", "90s" ->
"1m 30s"). Like humantime, it counts a month as 30.44 days and a year as 365.25 days, and spells
days, months and years out ("2days", "1month").
"""

from __future__ import annotations

import re

__all__ = [
    "format_duration",
    "normalize_duration",
    "parse_duration",
    "parse_duration_seconds",
]

_NS_PER_SECOND = 1_000_000_000
_SECONDS_PER_DAY = 86_400
_SECONDS_PER_MONTH = 2_630_016  # 30.44 days, as humantime counts it.
_SECONDS_PER_YEAR = 31_557_600  # 365.25 days, as humantime counts it.

# Unit spelling -> nanoseconds; the spellings humantime's parser accepts.
_UNIT_NS: dict[str, int] = {}
for _names, _ns in (
    (("ns", "nsec", "nanos"), 1),
    (("us", "µs", "usec"), 1_000),
    (("ms", "msec", "millis"), 1_000_000),
    (("s", "sec", "secs", "second", "seconds"), _NS_PER_SECOND),
    (("m", "min", "mins", "minute", "minutes"), 60 * _NS_PER_SECOND),
    (("h", "hr", "hrs", "hour", "hours"), 3_600 * _NS_PER_SECOND),
    (("d", "day", "days"), _SECONDS_PER_DAY * _NS_PER_SECOND),
    (("w", "week", "weeks"), 7 * _SECONDS_PER_DAY * _NS_PER_SECOND),
    (("M", "month", "months"), _SECONDS_PER_MONTH * _NS_PER_SECOND),
    (("y", "year", "years"), _SECONDS_PER_YEAR * _NS_PER_SECOND),
):
    for _name in _names:
        _UNIT_NS[_name] = _ns

_WHOLE = re.compile(r"\s*(?:\d+\s*[^\W\d_]+\s*)+")
_ITEM = re.compile(r"(\d+)\s*([^\W\d_]+)")


def _invalid(text: object, why: str) -> TypeError:
    return TypeError(
        f"Invalid duration format {text!r}: {why}. "
        "Write an integer followed by a unit, for example '30s', '1m 30s' or '500ms' "
        "(units: ns, us, ms, s, m, h, d, w, M, y)."
    )


def parse_duration(text: str) -> int:
    """Return the duration in nanoseconds; TypeError ("Invalid duration format") if malformed."""
    if not isinstance(text, str):
        raise _invalid(text, f"expected a str, got {type(text).__name__}")
    if not _WHOLE.fullmatch(text):
        why = "it is empty" if not text.strip() else "every number needs a unit"
        raise _invalid(text, why)
    total = 0
    for digits, unit in _ITEM.findall(text):
        scale = _UNIT_NS.get(unit)
        if scale is None:
            raise _invalid(text, f"unknown unit {unit!r}")
        total += int(digits) * scale
    return total


def parse_duration_seconds(text: str) -> float:
    """Return the duration in (float) seconds."""
    return parse_duration(text) / _NS_PER_SECOND


def _plural(count: int, word: str) -> str:
    return f"{count}{word}s" if count > 1 else f"{count}{word}"


def format_duration(nanoseconds: int) -> str:
    """Return the canonical humantime spelling of a non-negative number of nanoseconds."""
    if nanoseconds < 0:
        raise ValueError(f"A duration cannot be negative, got {nanoseconds} ns.")
    if nanoseconds == 0:
        return "0s"
    secs, nanos = divmod(nanoseconds, _NS_PER_SECOND)
    years, rest = divmod(secs, _SECONDS_PER_YEAR)
    months, rest = divmod(rest, _SECONDS_PER_MONTH)
    days, rest = divmod(rest, _SECONDS_PER_DAY)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    millis, rest_ns = divmod(nanos, 1_000_000)
    micros, nanos_left = divmod(rest_ns, 1_000)
    items: list[str] = []
    if years:
        items.append(_plural(years, "year"))
    if months:
        items.append(_plural(months, "month"))
    if days:
        items.append(_plural(days, "day"))
    for count, unit in (
        (hours, "h"),
        (minutes, "m"),
        (seconds, "s"),
        (millis, "ms"),
        (micros, "us"),
        (nanos_left, "ns"),
    ):
        if count:
            items.append(f"{count}{unit}")
    return " ".join(items)


def normalize_duration(text: str) -> str:
    """Return the canonical spelling of `text` ("300s" -> "5m"); TypeError if malformed."""
    return format_duration(parse_duration(text))
