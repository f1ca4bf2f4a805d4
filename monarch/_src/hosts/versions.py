"""The versions that matter for pickles, compared between a controller and its hosts.

Messages between a controller and the procs on its hosts are pickles (cloudpickle for code,
numpy arrays and torch tensors by their own reducers), so a host whose Python, monarch, torch,
cloudpickle, numpy or distributed differs from the controller's fails in ways that are hard to
read (an `AttributeError` while unpickling, a segfault in a tensor reducer). A host reports its
versions (`collect()`) in its answer to `host_attach` (`hosts/served.py`), so checking them costs
no round trip; the client (`hosts/remote_agent.py`) compares them once per attach, when every
host has answered, and acts on the `version_check` config key:

* `"warn"` (default): one `VersionMismatchWarning` (a `UserWarning`) whose text is a table of
  each package that differs, the controller's version and each distinct host version with the
  hosts that have it (as Dask's `Client.get_versions(check=True)`); the same text is logged
  where logging is configured;
* `"ignore"`: nothing;
* `"error"`: a host whose versions differ is not attached: `HostMesh.initialized` raises a
  `RuntimeError` with the table, and the host serves its next client.

Versions are read from the installed distributions' metadata (`importlib.metadata`), so nothing
is imported (no torch just to read its version); a package that is not installed reads None and
shows as "not installed". Python is compared as major.minor.micro, monarch by its
`__version__` (the `monarch-dask` distribution's version).
"""

from __future__ import annotations

import functools
import logging
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from monarch._src.config import get as config_get

__all__ = [
    "MONARCH_VERSION",
    "Mismatch",
    "VersionMismatchWarning",
    "check_host",
    "collect",
    "compare",
    "format_table",
    "mismatch_message",
    "warn_mismatches",
]

logger = logging.getLogger(__name__)

# Package name as shown -> the distribution its version is read from ("" for Python itself).
PACKAGES: dict[str, str] = {
    "python": "",
    "monarch": "monarch-dask",
    "torch": "torch",
    "cloudpickle": "cloudpickle",
    "numpy": "numpy",
    "distributed": "distributed",
}

NOT_INSTALLED = "not installed"  # shown for a package a side does not have
NOT_REPORTED = "not reported"  # shown for a package a host did not report (an older monarch)
_MAX_LABELS = 4  # host labels listed per version; the rest are counted


def _distribution_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # ~20 ms: not at import

    try:
        return version(name)
    except PackageNotFoundError:
        return None


@functools.cache
def _monarch_version() -> str:
    return _distribution_version(PACKAGES["monarch"]) or "unknown"


# Declared for type checkers and `__all__`: its value comes from `__getattr__`, on first use.
MONARCH_VERSION: str


def __getattr__(name: str) -> str:
    """`MONARCH_VERSION`, what `monarch.__version__` is ("unknown" when monarch runs from a
    tree that is not installed); read on first use, since parsing a distribution's metadata
    costs ~20 ms that `import monarch.actor` need not pay."""
    if name == "MONARCH_VERSION":
        return _monarch_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class VersionMismatchWarning(UserWarning):
    """Attached hosts run other versions of Python or of packages that pickles depend on."""


@functools.cache
def _collected() -> tuple[tuple[str, str | None], ...]:
    found: list[tuple[str, str | None]] = []
    for package, distribution in PACKAGES.items():
        if package == "python":
            found.append((package, "{}.{}.{}".format(*sys.version_info[:3])))
        elif package == "monarch":
            found.append((package, _monarch_version()))
        else:
            found.append((package, _distribution_version(distribution)))
    return tuple(found)


def collect() -> dict[str, str | None]:
    """This process's versions: package -> version, None where it is not installed (read once
    per process; installing a package while running is not noticed)."""
    return dict(_collected())


@dataclass(frozen=True)
class Mismatch:
    """One package whose version differs: the controller's and each distinct host version
    (in host order) with the labels of the hosts that have it."""

    package: str
    controller: str
    hosts: tuple[tuple[str, tuple[str, ...]], ...]


def _shown(report: Mapping[str, str | None] | None, package: str) -> str:
    if report is None or package not in report:
        return NOT_REPORTED
    value = report[package]
    return NOT_INSTALLED if value is None else str(value)


def compare(controller: Mapping[str, str | None],
            hosts: Mapping[str, Mapping[str, str | None] | None]) -> list[Mismatch]:
    """The packages (in `PACKAGES` order) whose version differs between `controller` and any
    of `hosts` (host label -> its report; None: the host reported nothing)."""
    found: list[Mismatch] = []
    for package in PACKAGES:
        mine = _shown(controller, package)
        by_version: dict[str, list[str]] = {}
        for label, report in hosts.items():
            by_version.setdefault(_shown(report, package), []).append(label)
        if set(by_version) - {mine}:
            found.append(Mismatch(package, mine, tuple(
                (v, tuple(labels)) for v, labels in by_version.items())))
    return found


def _host_cell(versions: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    lines = []
    for value, labels in versions:
        shown = ", ".join(labels[:_MAX_LABELS])
        if len(labels) > _MAX_LABELS:
            shown += f" and {len(labels) - _MAX_LABELS} more"
        lines.append(f"{value} on {shown}")
    return lines


def format_table(mismatches: list[Mismatch]) -> str:
    """An ASCII table with one row per package (Package | Controller | Hosts); a row has one
    line per distinct host version, naming the hosts that have it."""
    rows = [([m.package], [m.controller], _host_cell(m.hosts)) for m in mismatches]
    header = (["Package"], ["Controller"], ["Hosts"])
    widths = [max(len(line) for row in [header, *rows] for line in row[col]) for col in range(3)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def render(row: tuple[list[str], list[str], list[str]]) -> list[str]:
        height = max(len(cell) for cell in row)
        return ["| " + " | ".join((cell[i] if i < len(cell) else "").ljust(w)
                                  for cell, w in zip(row, widths)) + " |"
                for i in range(height)]

    out = [rule, *render(header), rule]
    for row in rows:
        out += [*render(row), rule]
    return "\n".join(out)


def mismatch_message(mismatches: list[Mismatch], what: str) -> str:
    """The full text about `mismatches`: `what` differs, why it matters, the table, and the
    config key that decides what happens."""
    return (f"{what} differ from this controller's; messages between them are pickles, which "
            "may fail to load (or load wrongly) across these versions. Install the same versions "
            "on both sides, or set the config key version_check ('warn', 'ignore' or 'error'; "
            f"it is {config_get('version_check')!r} now).\n{format_table(mismatches)}")


def check_host(label: str, report: Mapping[str, str | None] | None) -> None:
    """Under `version_check="error"`, raise RuntimeError (with the table) when the host
    `label`'s `report` differs from this process's versions; otherwise do nothing."""
    if config_get("version_check") != "error":
        return
    mismatches = compare(collect(), {label: report})
    if mismatches:
        raise RuntimeError(mismatch_message(
            mismatches, f"its versions of {', '.join(m.package for m in mismatches)}"))


def warn_mismatches(hosts: Mapping[str, Mapping[str, str | None] | None]) -> None:
    """Under `version_check="warn"`, warn once (`VersionMismatchWarning`) about every package
    whose version differs between this process and `hosts` (host label -> its report), and
    log the same text where logging is configured (without a handler, Python would print it
    to stderr a second time)."""
    if config_get("version_check") != "warn" or not hosts:
        return
    mismatches = compare(collect(), hosts)
    if not mismatches:
        return
    text = mismatch_message(mismatches, "The versions of attached hosts")
    warnings.warn(text, VersionMismatchWarning, stacklevel=2)
    if logger.hasHandlers():
        logger.warning("%s", text)
