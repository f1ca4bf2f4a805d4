"""Errors of the tensor engine: `RemoteException`, raised where a failed value is fetched."""

from __future__ import annotations

from typing import Any

from monarch._src.supervision.errors import MonarchError

__all__ = ["RemoteException", "WorkerError"]


class WorkerError:
    """Why a value on a worker is poisoned: the command that failed, where, and how.

    Held by workers for every value that depends on a failed command, and sent to the controller
    by a fetch. Plain strings only, so it always pickles.
    """

    __slots__ = ("rank", "seq", "text")

    def __init__(self, seq: int, rank: int, text: str) -> None:
        self.seq = seq  # the failed command's sequence number
        self.rank = rank  # engine rank of the worker where it failed
        self.text = text  # the worker's formatted traceback

    def __reduce__(self) -> tuple[Any, ...]:
        return (WorkerError, (self.seq, self.rank, self.text))


class RemoteException(MonarchError):
    """A remote tensor-engine operation failed; raised when a value depending on it is fetched.

    `str()` begins "A remote function has failed asynchronously on rank N" and carries the
    worker's traceback and the controller-side traceback of where the operation was issued.
    """

    def __init__(self, rank: int, worker_text: str, controller_text: str, op: str = "") -> None:
        self.rank = rank
        self.worker_error = worker_text
        self.controller_frames = controller_text
        self.op = op
        super().__init__(rank, worker_text, controller_text, op)

    def __str__(self) -> str:
        what = f" while running {self.op}" if self.op else ""
        return (
            f"A remote function has failed asynchronously on rank {self.rank}{what}.\n"
            f"Traceback of where the remote function was issued on controller "
            f"(most recent call last):\n{self.controller_frames}"
            f"Error as reported from worker:\n{self.worker_error}"
        )
