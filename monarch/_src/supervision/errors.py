"""The error tree of monarch.

Every error monarch raises derives from `MonarchError`, except the three names whose base classes
the Monarch API fixes: `ActorError` (an endpoint raised and a reply was expected),
`SupervisionError` (a `RuntimeError`: the target died or was stopped) and `MeshFailure` (passed to
`__supervise__` and the fault hook). Errors are formatted into strings before they travel, so they
pickle even when the original exception does not.
"""

from __future__ import annotations

import textwrap
import traceback
from typing import Any

__all__ = [
    "REPORT_HEAD",
    "ActorError",
    "FailureReport",
    "MeshFailure",
    "MessageTooLargeError",
    "MonarchError",
    "SupervisionError",
    "TransportError",
    "add_note",
    "failure_event",
    "failure_report",
    "format_remote_traceback",
]

_TRACEBACK_HEADER = "Traceback (most recent call last):"
_REMOTE_HEADER = "Traceback of where the remote call failed (most recent call last):"


class MonarchError(Exception):
    """Base of the errors monarch raises on its own account."""


class TransportError(MonarchError, ConnectionError):
    """The network failed: a peer could not be reached or a connection broke."""


def add_note(exc: BaseException, note: str) -> None:
    """`exc.add_note(note)` where Python has it (3.11+); otherwise leave `exc` as it is."""
    method = getattr(exc, "add_note", None)
    if method is not None:
        method(note)


def format_remote_traceback(exc: BaseException) -> str:
    """Format `exc` with its chain, headed as a remote traceback."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text.replace(_TRACEBACK_HEADER, _REMOTE_HEADER)


class ActorError(Exception):
    """An endpoint raised an `Exception` while its caller waited for a reply.

    `exception` is the original exception (or, when it could not be pickled, a `RuntimeError`
    carrying its text); `message` names the actor and the endpoint; `exception_formatted` is the
    remote traceback, chained causes included.
    """

    def __init__(
        self,
        exception: BaseException,
        message: str = "A remote actor call has failed.",
        exception_formatted: str | None = None,
    ) -> None:
        self.exception = exception
        self.message = message
        self.exception_formatted = (
            exception_formatted
            if exception_formatted is not None
            else format_remote_traceback(exception)
        )
        super().__init__(exception, message)  # args and repr as torchmonarch's

    def __str__(self) -> str:
        # torchmonarch indents the traceback's first line by one space; kept for programs that
        # match on the text.
        return f"{self.message}\n {self.exception_formatted}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ActorError, (self.exception, self.message, self.exception_formatted))


class SupervisionError(RuntimeError):
    """The actor a call was addressed to failed, died or was stopped.

    `str()` is "Endpoint call <mesh>.<endpoint>() failed, <report>" when the endpoint is known,
    else the report alone.
    """

    def __init__(self, report: str, endpoint: str | None = None) -> None:
        self.report = report
        self.endpoint = endpoint
        super().__init__(report)

    def __str__(self) -> str:
        if self.endpoint:
            return f"Endpoint call {self.endpoint}() failed, {self.report}"
        return self.report

    def __reduce__(self) -> tuple[Any, ...]:
        return (SupervisionError, (self.report, self.endpoint))


class MessageTooLargeError(SupervisionError, ValueError):
    """A message over `codec_max_frame_length`, refused at the sender: no receiver would take
    it. A SupervisionError, as on Meta's Monarch (where the call fails that way), and a
    ValueError (it is the argument that is wrong)."""

    def __init__(self, report: str, endpoint: str | None = None) -> None:
        super().__init__(report, endpoint)

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageTooLargeError, (self.report, self.endpoint))


# What follows the actor's display in a failure report, before the indented reason.
REPORT_HEAD = " and all its descendants have failed:\n"


def failure_report(display: str, reason: str) -> str:
    """Monarch's failure report of the actor `display`: "The actor <display> and all its
    descendants have failed:", then `reason` indented by two spaces. The one place this text is
    built (actor failures, proc deaths, setup failures)."""
    return f"The actor {display}{REPORT_HEAD}" + textwrap.indent(reason, "  ")


class FailureReport(str):
    """A failure report (what `SupervisionError`s and `MeshFailure.report()` show) that also
    carries the supervision event an owner is told (what `str(MeshFailure)` shows), when the
    event does not follow from the report (a failure propagated from a child)."""

    event: str | None

    def __new__(cls, report: str, event: str | None = None) -> FailureReport:
        obj = super().__new__(cls, report)
        obj.event = event
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (FailureReport, (str(self), self.event))


def failure_event(report: str) -> str:
    """The supervision event for `report`: "Supervision event: actor <a> failed:" + reason,
    where the report reads "The actor <a> and all its descendants have failed:" + reason."""
    if isinstance(report, FailureReport) and report.event is not None:
        return report.event
    if report.startswith("The actor ") and REPORT_HEAD in report:
        actor, reason = report[len("The actor "):].split(REPORT_HEAD, 1)
        return f"Supervision event: actor {actor} failed:\n{reason}"
    return str(report)


class MeshFailure:
    """A failure of some ranks of a mesh, given to `__supervise__` and the fault hook.

    `report()` is the report of the failure at its origin (what calls to the failed actor
    raise); `str()` shows the supervision event the owner received. Not picklable, as in
    Monarch: convert it to `str` to send it anywhere.
    """

    def __init__(self, mesh_name: str, crashed_ranks: list[int], event: str) -> None:
        self.mesh_name = mesh_name
        self.crashed_ranks = list(crashed_ranks)
        self._report = event  # the report (a `FailureReport` when the event differs)
        self.event = failure_event(event)
        self.mesh = None

    def report(self) -> str:
        """The human-readable failure report."""
        return str(self._report)

    def __str__(self) -> str:
        return (
            f"MeshFailure(mesh_name={self.mesh_name}, crashed_ranks={self.crashed_ranks}, "
            f"event={self.event})"
        )

    __repr__ = __str__

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            "MeshFailure cannot be pickled. Convert it with str(failure) before sending it."
        )
