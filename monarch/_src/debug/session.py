"""The debug controller's record of each paused actor: `DebugSession`, and `DebugSessions`,
the sessions by actor mesh name and rank.

A session lives from the first stop of an endpoint call (a `breakpoint()`, or post-mortem) until
that call ends: stepping through code, `continue` and a later stop in the same call all belong to
it. What the actor's pdb writes, and each time it waits for a command, arrive as events
(`write`, `request_input`) queued until a terminal is attached; `attach` plays them to the
terminal and answers requests with the user's lines (`deliver` sends a line to the actor).
Typing `detach` leaves the session with its request unanswered, so the next attachment answers
it; what pdb wrote since the last command is shown again then.

Everything here runs on the controller's event loop except `DebugSessions`'s lookups and each
session's `ended` event, which any thread may use.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from monarch._src.debug.command import RanksType
from monarch._src.debug.io import DebugIO, DebugIOError

__all__ = ["DebugSession", "DebugSessionInfo", "DebugSessions"]


@dataclass
class DebugSessionInfo:
    """What `list` shows of one session; ordered by actor name, then rank."""

    actor_name: str
    rank: int
    coords: dict[str, int]
    hostname: str
    function: str | None  # "module.function" where pdb last stopped
    lineno: int | None

    def __lt__(self, other: DebugSessionInfo) -> bool:
        return (self.actor_name, self.rank) < (other.actor_name, other.rank)


_READ = "read"
_END = "end"
_Event = str | tuple[str, str]  # _READ, _END or ("write", text)


class DebugSession:
    """One paused actor rank, as the controller sees it."""

    def __init__(self, rank: int, coords: dict[str, int], hostname: str, actor_name: str,
                 deliver: Callable[[str], None] | None = None,
                 details: dict[str, Any] | None = None) -> None:
        self.rank = rank
        self.coords = coords
        self.hostname = hostname
        self.actor_name = actor_name
        # Sends one line to the actor's pdb; None for a session no actor stands behind.
        self.deliver = deliver
        self.details: dict[str, Any] = dict(details or {})  # pid, kind, where, display, address
        self._events: asyncio.Queue[_Event] = asyncio.Queue()
        self._outputs_since_input: list[str] = []  # shown again on the next attachment
        self._function_lineno: tuple[str, int] | None = None
        self._unanswered_read = False  # a request taken from the queue but not answered
        self._active = False
        self.ended = threading.Event()  # set once the actor's call is over (or its process)
        self.claim = threading.Lock()  # held by a thread-side attachment (`SessionHandle`)

    # ---- the actor's side (controller loop) ---------------------------------------------------
    def write(self, text: str, function: str | None = None, lineno: int | None = None) -> None:
        """pdb wrote `text`, stopped in `function` at `lineno` (when known)."""
        if function is not None and lineno is not None:
            self._function_lineno = (function, lineno)
        self._events.put_nowait(("write", text))

    def request_input(self) -> None:
        """pdb waits for a command."""
        self._events.put_nowait(_READ)

    def end(self) -> None:
        """The actor's call is over: an attachment returns, later ones only replay."""
        self.ended.set()
        self._events.put_nowait(_END)

    # ---- terminals (controller loop) ----------------------------------------------------------
    def get_info(self) -> DebugSessionInfo:
        function, lineno = self._function_lineno or (None, None)
        return DebugSessionInfo(self.actor_name, self.rank, self.coords, self.hostname,
                                function, lineno)

    @property
    def active(self) -> bool:
        """Whether a terminal is attached."""
        return self._active

    async def attach(self, debug_io: DebugIO, line: str | None = None,
                     suppress_output: bool = False, banner: bool = True) -> None:
        """Attach `debug_io` until the user types `detach` or the session ends. With `line`,
        answer the next request with it and return (`cast`); `suppress_output` shows nothing."""
        show = not suppress_output
        where = f"{self.actor_name} {self.rank} ({self.hostname})"
        self._active = True
        try:
            if show and banner:
                await debug_io.output(f"Attached to debug session for {where}\n")
            await self._run(debug_io, line, show)
        finally:
            self._active = False
        if show and banner:
            await debug_io.output(f"Detached from debug session for {where}\n")

    async def _run(self, debug_io: DebugIO, line: str | None, show: bool) -> None:
        if show and self._outputs_since_input:
            await debug_io.output(f"<last pdb output for {self.actor_name} {self.rank} "
                                  "follows>\n")
            for text in self._outputs_since_input:
                await debug_io.output(text)
        while True:
            if self._unanswered_read:
                event: _Event = _READ
                self._unanswered_read = False
            elif self.ended.is_set() and self._events.empty():
                return
            else:
                event = await self._events.get()
            if event == _END:
                return
            if event == _READ:
                if self.ended.is_set():
                    continue  # nobody waits for it any more
                one_shot = line is not None
                try:
                    text = line if line is not None else await debug_io.input()
                except (DebugIOError, asyncio.CancelledError):
                    self._unanswered_read = True
                    raise
                if text.strip() == "detach":
                    self._unanswered_read = True
                    return
                if self.deliver is not None:
                    self.deliver(text)
                self._outputs_since_input = []
                line = None
                if one_shot:
                    return
                continue
            assert isinstance(event, tuple)
            self._outputs_since_input.append(event[1])
            if show:
                await debug_io.output(event[1])


class DebugSessions:
    """The live sessions by actor mesh name and rank. Lookups are safe from any thread."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[int, DebugSession]] = {}
        self._lock = threading.Lock()

    def insert(self, session: DebugSession) -> None:
        with self._lock:
            by_rank = self._sessions.setdefault(session.actor_name, {})
            if session.rank in by_rank:
                raise ValueError(f"Debug session for rank {session.rank} already exists for "
                                 f"actor {session.actor_name}")
            by_rank[session.rank] = session

    def _find(self, actor_name: str, rank: int) -> dict[int, DebugSession]:
        by_rank = self._sessions.get(actor_name)
        if by_rank is None:
            raise ValueError(f"No debug sessions for actor {actor_name}")
        if rank not in by_rank:
            raise ValueError(f"No debug session for rank {rank} for actor {actor_name}")
        return by_rank

    def remove(self, actor_name: str, rank: int) -> DebugSession:
        with self._lock:
            by_rank = self._find(actor_name, rank)
            session = by_rank.pop(rank)
            if not by_rank:
                del self._sessions[actor_name]
            return session

    def get(self, actor_name: str, rank: int) -> DebugSession:
        with self._lock:
            return self._find(actor_name, rank)[rank]

    def all(self) -> list[DebugSession]:
        """Every session, ordered by actor name and rank."""
        with self._lock:
            found = [s for by_rank in self._sessions.values() for s in by_rank.values()]
        return sorted(found, key=lambda s: (s.actor_name, s.rank))

    def iter(self, selection: tuple[str, RanksType | None] | None) -> Iterator[DebugSession]:
        """The sessions `selection` picks: None for all; (actor name, None) for all of that
        actor; (name, ranks) for a rank, a list or range of ranks, or a {dimension: rank(s)}
        filter on the sessions' coordinates (a dimension a session lacks excludes it)."""
        if selection is None:
            yield from self.all()
            return
        actor_name, ranks = selection
        with self._lock:
            by_rank = dict(self._sessions.get(actor_name, {}))
        for rank, session in sorted(by_rank.items()):
            if _selected(rank, session.coords, ranks):
                yield session

    def info(self) -> list[DebugSessionInfo]:
        return [s.get_info() for s in self.all()]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(by_rank) for by_rank in self._sessions.values())

    def __contains__(self, item: tuple[str, int]) -> bool:
        actor_name, rank = item
        with self._lock:
            return rank in self._sessions.get(actor_name, {})


def _selected(rank: int, coords: dict[str, int], ranks: RanksType | None) -> bool:
    if ranks is None:
        return True
    if isinstance(ranks, dict):
        for dim, wanted in ranks.items():
            if dim not in coords:
                return False
            if isinstance(wanted, int):
                if coords[dim] != wanted:
                    return False
            elif coords[dim] not in wanted:
                return False
        return True
    if isinstance(ranks, int):
        return rank == ranks
    return rank in ranks
