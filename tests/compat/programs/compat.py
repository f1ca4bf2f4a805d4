"""The helpers every compatibility program uses; standard library only.

A program prints one line per behaviour, ``check <label>: <text>``. The harness (``run.py``)
compares those lines with the golden file recorded from torchmonarch 0.7.0, so the same program
must run unchanged on both implementations. Everything else a program prints is ignored.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable
from typing import Any

__all__ = ["REFERENCE", "check", "differs", "ours_only", "outcome", "raises", "text"]


def _is_reference() -> bool:
    try:
        importlib.metadata.version("torchmonarch")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


#: True when the program runs against Meta's torchmonarch rather than this project.
REFERENCE = _is_reference()

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")

#: The line an `ours_only` behaviour prints on torchmonarch before its check (run.py reads it).
NOT_RUN_PREFIX = "not run on torchmonarch: "


def text(value: object) -> str:
    """The one-line form of a checked value: the string itself, or its repr."""
    rendered = value if isinstance(value, str) else repr(value)
    rendered = _ADDRESS.sub("0x?", rendered)
    return rendered.replace("\\", "\\\\").replace("\n", "\\n")


def check(label: str, value: object) -> None:
    """Print one behaviour: ``check <label>: <value>``."""
    if not label or ":" in label or "\n" in label:
        raise ValueError(f"check label {label!r} must be non-empty, without ':' or newlines")
    print(f"check {label}: {text(value)}", flush=True)


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """``ExcType: message`` for what fn raises, or ``returned <repr>``."""
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the point is to report any exception
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return f"{type(exc).__name__}: {exc}"
    return f"returned {value!r}"


def raises(label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Check what calling fn does: the exception's type and message, or the value returned."""
    check(label, outcome(fn, *args, **kwargs))


def ours_only(label: str, fn: Callable[[], Any], expected: object, reason: str) -> None:
    """A behaviour torchmonarch 0.7.0 cannot show (it crashes or hangs: `reason` says how).

    On torchmonarch fn is not run; on ours fn() must equal `expected`. Both print the same line,
    so the golden file recorded from torchmonarch holds for ours too.
    """
    if not reason:
        raise ValueError(f"ours_only({label!r}) needs the reason torchmonarch cannot run it")
    if REFERENCE:
        # Not a check: tells run.py that this line proves nothing on torchmonarch, so it is
        # counted as not run there, not as a pass.
        print(f"{NOT_RUN_PREFIX}{label}", flush=True)
        check(label, f"ours only ({reason})")
        return
    got = fn()
    if got == expected:
        check(label, f"ours only ({reason})")
    else:
        check(label, f"MISMATCH: expected {expected!r}, got {got!r}")



def differs(label: str, fn: Callable[[], Any], ours: object, torchmonarch: object,
            reason: str) -> None:
    """A behaviour where the two implementations differ on purpose (torchmonarch neither hangs
    nor crashes: it does something else, which `reason` names).

    fn runs on both; it must return `torchmonarch` there and `ours` here. Both print the same
    line, so the golden file recorded from torchmonarch holds for ours too.
    """
    if not reason:
        raise ValueError(f"differs({label!r}) needs the reason the behaviours differ")
    want = torchmonarch if REFERENCE else ours
    got = fn()
    if got == want:
        check(label, f"differs ({reason})")
    else:
        check(label, f"MISMATCH: expected {want!r}, got {got!r}")
