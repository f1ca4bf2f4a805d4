"""`MeshFuture`: the Future of `endpoint.call()`, which also shows the replies as they come.

A call over a mesh completes when every rank answered; until then a plain Future shows nothing.
A `MeshFuture` is that same Future (get, await, cancel, map... unchanged) that also reads the
call's reply port (`runtime.ports.GatherPort`) while replies arrive:

* `partial()` is a dict `{Point: value}` of the replies received so far, in arrival order; a
  rank whose endpoint raised has its exception object as its value (not raised).
* Iterating (`for point, value in fut:`) yields the same `(Point, value)` pairs in arrival
  order, blocking until the next reply comes; it ends once every rank answered. If the call
  ends without some replies (a proc died, the call was cancelled) it raises the future's error
  after the replies that did arrive. An interrupt while it waits cancels the call, as `get()`.
* `progress()` is a `CallProgress`: per rank done / pending / failed / cancelled, elapsed
  seconds, error text; the notebook's live widget (`monarch.notebook.FutureView`) draws it.

Each rank's reply is decoded once, in the first reader's thread, and shared by `partial()`,
iteration and `get()` (the same objects). The points are those of the ValueMesh that `get()`
returns: local row-major ranks of the called mesh.

As a cell's value in a notebook it shows as that live widget, through the hook slot
`future_view` (filled by `monarch.notebook`); elsewhere its repr is a plain Future's.
Rejected alternative: progress pushed from the loop to listeners. Readers poll the port
instead (a widget a few times a second), so a reply costs the loop one clock read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from monarch._src.mesh import hooks
from monarch._src.mesh.value_mesh import ValueMesh
from monarch._src.runtime.envelope import PORT_ERROR
from monarch._src.runtime.future import Future
from monarch._src.runtime.ports import GatherPort
from monarch._src.shape import Extent, Point, Shape

__all__ = ["CallProgress", "MeshFuture", "RankProgress"]

R = TypeVar("R")

# A rank's state in `RankProgress.state`.
PENDING, DONE, FAILED, CANCELLED = "pending", "done", "failed", "cancelled"
_MAX_ERROR_TEXT = 4000  # characters of a failed rank's error kept for display


@dataclass(frozen=True)
class RankProgress:
    """One rank of a mesh call as it stands.

    `state` is "done" (it returned a value), "failed" (its endpoint raised, or the call failed
    before it answered: its proc died), "pending" (no reply yet) or "cancelled" (the call was
    cancelled before it answered). `elapsed` is seconds from the post to its reply, or to now
    (pending), or to when the call ended without it. `error` is the text of its error when
    failed, else "".
    """

    rank: int
    point: Point
    state: str
    elapsed: float
    error: str


@dataclass(frozen=True)
class CallProgress:
    """A mesh call as it stands: what was called, each rank, and seconds since the post (until
    the call ended, once it did)."""

    what: str
    ranks: tuple[RankProgress, ...]
    elapsed: float
    finished: bool

    def count(self, state: str) -> int:
        """How many ranks are in `state`."""
        return sum(1 for r in self.ranks if r.state == state)

    def summary(self) -> str:
        """One line: "3/4 done, 1 failed, 2.1 s" (states with no rank are left out)."""
        parts = [f"{self.count(DONE)}/{len(self.ranks)} done"]
        parts += [f"{self.count(s)} {s}" for s in (FAILED, CANCELLED, PENDING) if self.count(s)]
        return ", ".join(parts) + f", {self.elapsed:.1f} s"


class MeshFuture(Future[ValueMesh[R]]):
    """The Future of `endpoint.call()`: a Future of the ValueMesh, plus the replies so far.

    `partial()`, iteration and `progress()` are described in this module's docstring. The
    class is named "Future", as the type of every future in torchmonarch, so code that prints
    `type(fut).__name__` sees what it saw before; its repr is a Future's.
    """

    __slots__ = ("_arrival", "_decode_one", "_decoded", "_port", "_shape", "_what")
    _port: GatherPort
    _shape: Shape  # of the gathered ValueMesh (local ranks)
    _decode_one: Callable[[Any], Any]
    _what: Callable[[], str]
    # rank -> (True, value) or (False, the exception its reply carried), once decoded
    _decoded: dict[int, tuple[bool, Any]]
    _arrival: threading.Condition | None  # notified on each reply once someone iterates

    @classmethod
    def of_call(
        cls,
        port: GatherPort,
        shape: Shape,
        decode_one: Callable[[Any], R],
        answered: Callable[[], None],
        map_error: Callable[[BaseException], BaseException],
        cancel: Callable[[], str] | None,
        what: Callable[[], str],
    ) -> MeshFuture[R]:
        """The future of a call whose replies `port` gathers, shaped as `shape` (local ranks).

        `decode_one(reply)` decodes one raw reply (raising the error it carries);
        `answered()` runs once when the ValueMesh is made (the traffic counters); `map_error`
        and `cancel` are `Future.from_concurrent`'s; `what()` names the endpoint ("mesh.ep").
        Building one costs little: `call()` makes one per call.
        """
        decoded: dict[int, tuple[bool, Any]] = {}

        def gather(raw: list[Any]) -> ValueMesh[R]:
            answered()
            values = []
            for rank, reply in enumerate(raw):  # `_decode` inlined: this runs on every call
                known = decoded.get(rank)
                if known is None:
                    try:
                        known = (True, decode_one(reply))
                    except Exception as exc:
                        known = (False, exc)
                    known = decoded.setdefault(rank, known)
                if not known[0]:  # the first failing rank's error, in rank order
                    raise known[1]
                values.append(known[1])
            return ValueMesh(shape, values)

        fut = cast("MeshFuture[R]", cls.from_concurrent(port.cf, gather, map_error, cancel))
        fut._port = port
        fut._shape = shape
        fut._decode_one = decode_one
        fut._what = what
        fut._decoded = decoded
        fut._arrival = None
        return fut

    @property
    def extent(self) -> Extent:
        """The extent of the ValueMesh this future gathers (the called mesh's)."""
        return self._shape.extent

    def partial(self) -> dict[Point, Any]:
        """The replies received so far, `{point: value}` in arrival order; a failed rank's
        value is its exception. Never blocks (decoding aside)."""
        extent = self.extent
        return {Point(rank, extent): self._value_of(rank) for rank in list(self._port.order)}

    def __iter__(self) -> Iterator[tuple[Point, Any]]:
        """`(point, value)` per reply in arrival order, waiting for each; ends when every rank
        answered, raises the future's error if it ended short (see the module docstring)."""
        port = self._port
        extent = self.extent
        arrival = self._watch()
        seen = 0
        while True:
            with arrival:
                while len(port.order) <= seen and not self.done():
                    try:
                        arrival.wait()
                    except KeyboardInterrupt:  # as in get(): cancel, and say so in one line
                        self._raise_cancelled()
                        raise
            if seen < len(port.order):
                rank = port.order[seen]
                seen += 1
                yield Point(rank, extent), self._value_of(rank)
            elif seen == len(port.replies):
                return
            else:  # done, and no more replies will come
                self.outcome()  # raises the call's error
                return

    def progress(self) -> CallProgress:
        """Each rank's state, elapsed time and error text now (see `RankProgress`)."""
        port = self._port
        extent = self.extent
        now = time.monotonic()
        finished = self.done()
        answered = set(port.order)
        unanswered_state, unanswered_error = PENDING, ""
        if finished and len(answered) < len(port.replies):
            if self.cancelled():
                unanswered_state = CANCELLED
            else:
                unanswered_state = FAILED
                try:
                    self.outcome()
                except BaseException as exc:
                    unanswered_error = _error_text(exc)
        end = port.ended or now
        ranks = []
        for rank in range(len(port.replies)):
            point = Point(rank, extent)
            if rank in answered:
                reply = port.replies[rank]
                assert reply is not None
                elapsed = port.arrived[rank] - port.posted
                if reply[0] == PORT_ERROR:
                    ranks.append(RankProgress(rank, point, FAILED, elapsed,
                                              _error_text(self._value_of(rank))))
                else:
                    ranks.append(RankProgress(rank, point, DONE, elapsed, ""))
            else:
                ranks.append(RankProgress(rank, point, unanswered_state, end - port.posted,
                                          unanswered_error))
        return CallProgress(self._what(), tuple(ranks), end - port.posted, finished)

    def _value_of(self, rank: int) -> Any:
        """Rank `rank`'s value or error, decoded once; it must have answered."""
        known = self._decoded.get(rank)
        if known is None:
            reply = self._port.replies[rank]
            assert reply is not None, f"rank {rank} has not answered"
            known = _decode(self._decoded, rank, self._decode_one, reply)
        return known[1]

    def _watch(self) -> threading.Condition:
        """The condition notified on each reply (and when the port fails), made on first use."""
        with _WATCH_LOCK:
            if self._arrival is None:
                arrival = threading.Condition()

                def notify() -> None:
                    with arrival:
                        arrival.notify_all()

                self._arrival = arrival
                self._port.on_reply = notify
                # A cancel fails the port later, on the loop; waiters wake at once.
                self.add_done_callback(lambda _: notify())
            return self._arrival

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
        """The live widget in a notebook (hook slot `future_view`); None elsewhere, so the
        plain repr shows."""
        view = hooks.future_view.get()
        return None if view is None else view(self)


_WATCH_LOCK = threading.Lock()  # makes each future's arrival condition once


def _decode(decoded: dict[int, tuple[bool, Any]], rank: int, decode_one: Callable[[Any], Any],
            reply: Any) -> tuple[bool, Any]:
    """Decode `reply` into `decoded[rank]` unless another thread got there first; the one
    stored is returned, so every reader sees the same objects."""
    try:
        fresh: tuple[bool, Any] = (True, decode_one(reply))
    except Exception as exc:  # the rank's error is its outcome
        fresh = (False, exc)
    return decoded.setdefault(rank, fresh)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > _MAX_ERROR_TEXT:
        text = text[:_MAX_ERROR_TEXT] + " ..."
    return text


MeshFuture.__name__ = "Future"  # see the class docstring
