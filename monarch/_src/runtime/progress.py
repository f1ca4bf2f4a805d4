"""One progress report for long work: procs coming up, job bring-up, workspace sync, large RDMA
transfers.

A `Progress(title, total, unit)` is fed by the work (`update(done)`, `advance(n)`) and ended by
`close()` (or by leaving its `with` block); a *renderer* shows it. Renderers:

* `TerminalRenderer` (the default): on a terminal the line `[monarch] title: 3/8 detail` is
  rewritten in place (`\\r`); on anything else (a pipe, a log file) only the first and the last
  state are written, one line each, so logs stay readable.
* the notebook's bar and label in the running cell, which `monarch.notebook` installs with
  `set_renderer_factory` when it is imported under IPython (this layer imports no widget code).
* `NullRenderer`, which shows nothing.

When a report is shown is the config key `progress` (read when the `Progress` is created):

* `"auto"` (default): only work that is still running `SHOW_AFTER` (0.5 s) after it started is
  shown, and only where someone watches it: a terminal or a notebook cell, in the user's
  process (procs never show their own). Fast work creates no output at all, and work that
  nobody watches (a pipe, a log file, a proc) gets an inert report that does nothing.
* `"always"`: every report is shown from its start, in procs and logs too.
* `"off"`: nothing is shown.

A `Progress` given an explicit `renderer` is shown whatever the key says (the caller asked for
that display, e.g. `monarch.notebook.spawn_progress`). Callers keep the fast path free: the
call sites create a `Progress` only for work that can be long (procs not up yet when the user
waits on them, RDMA transfers of `LARGE_TRANSFER` bytes or more, a job's bring-up, a workspace
sync), so a small call or transfer creates nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Protocol, TextIO

from monarch._src.config import get as config_get
from monarch._src.runtime.runtime import runtime_if_started

__all__ = [
    "LARGE_TRANSFER",
    "MODES",
    "SHOW_AFTER",
    "NullRenderer",
    "Progress",
    "ProgressState",
    "Renderer",
    "RendererFactory",
    "TerminalRenderer",
    "format_bytes",
    "set_renderer_factory",
]

logger = logging.getLogger(__name__)

SHOW_AFTER = 0.5  # seconds: under "auto", work that is done sooner shows nothing
LARGE_TRANSFER = 64 << 20  # bytes: RDMA transfers this large (in total) report progress
MODES = ("auto", "always", "off")  # the values of the `progress` config key

_BYTE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: float) -> str:
    """`n` bytes for people: "512 B", "1.5 MiB", "2.0 GiB"."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in _BYTE_UNITS:
        n /= 1024
        if n < 1024 or unit == _BYTE_UNITS[-1]:
            break
    return f"{n:.1f} {unit}"


@dataclass(frozen=True)
class ProgressState:
    """What a renderer shows: one report at one moment.

    `unit` "B" counts bytes (shown as "1.5 MiB/8.0 MiB"); any other unit is a plain count
    ("3/8", or "3/8 files" with unit "files"). `final` is set on the last state a renderer gets
    (`Renderer.finish`), `failed` when the work failed (the error is in `detail`).
    """

    title: str
    total: int
    unit: str
    done: int
    detail: str
    final: bool = False
    failed: bool = False

    @property
    def counts(self) -> str:
        """"3/8", "3/8 files" or "1.5 MiB/8.0 MiB"."""
        if self.unit == "B":
            return f"{format_bytes(self.done)}/{format_bytes(self.total)}"
        tail = f" {self.unit}" if self.unit else ""
        return f"{self.done}/{self.total}{tail}"

    @property
    def text(self) -> str:
        """`title: counts detail`, the line every renderer shows."""
        tail = f" {self.detail}" if self.detail else ""
        return f"{self.title}: {self.counts}{tail}"


class Renderer(Protocol):
    """Shows a `Progress`. `watched`: whether a person sees it change (a terminal, a notebook
    cell); under `progress="auto"` a report whose renderer is not watched shows nothing.
    `show` gets each new state (the first one included), `finish` the last one; both are called
    under the report's lock, from whichever thread fed the report."""

    @property
    def watched(self) -> bool: ...

    def show(self, state: ProgressState) -> None: ...

    def finish(self, state: ProgressState) -> None: ...


RendererFactory = Callable[[], Renderer]


class TerminalRenderer:
    """A `[monarch] ...` line on `stream` (default: `sys.stderr` when created).

    On a terminal (`stream.isatty()`) the line is rewritten in place on each state and ended
    on the last; elsewhere only the first and the last state are written, one line each.
    `watched` defaults to whether `stream` is a terminal (a pipe or a file is read later, if
    ever); pass True for a stream someone reads as it is written, such as a notebook cell's.
    """

    def __init__(self, stream: TextIO | None = None, *, watched: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        try:
            self._tty = bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
            self._tty = False
        self._watched = self._tty if watched is None else watched
        self._started = False

    @property
    def watched(self) -> bool:
        """Whether someone sees the lines as they are written."""
        return self._watched

    def show(self, state: ProgressState) -> None:
        first = not self._started
        self._started = True
        if self._tty:
            self.stream.write(f"\r[monarch] {_one_line(state.text)}\x1b[K")
        elif first:
            self.stream.write(f"[monarch] {_one_line(state.text)}\n")
        else:
            return
        self.stream.flush()

    def finish(self, state: ProgressState) -> None:
        text = _one_line(state.text)
        self.stream.write(f"\r[monarch] {text}\x1b[K\n" if self._tty else f"[monarch] {text}\n")
        self.stream.flush()


def _one_line(text: str) -> str:
    """The first line of `text`, "..." when there is more: a failure report has many lines,
    and the error itself reaches the user anyway."""
    head, newline, _ = text.partition("\n")
    return head + " ..." if newline else head


class NullRenderer:
    """Shows nothing (what `progress="off"` amounts to, for one report)."""

    watched = False

    def show(self, state: ProgressState) -> None:
        pass

    def finish(self, state: ProgressState) -> None:
        pass


_factory: RendererFactory = TerminalRenderer


def set_renderer_factory(factory: RendererFactory | None) -> RendererFactory:
    """Make `factory()` the renderer of every report created from now on without an explicit
    renderer (None: `TerminalRenderer` again); returns the factory it replaces.

    `monarch.notebook` installs its cell renderer this way; tests install a captured stream."""
    global _factory
    if factory is not None and not callable(factory):
        raise TypeError(
            f"set_renderer_factory takes a function returning a renderer (or None), got "
            f"{type(factory).__name__}."
        )
    previous = _factory
    _factory = factory if factory is not None else TerminalRenderer
    return previous


def _mode() -> str:
    return str(config_get("progress"))


def _in_a_proc() -> bool:
    """True in a proc (not the user's process): procs never show automatic reports."""
    rt = runtime_if_started()
    return rt is not None and not rt.is_controller


class Progress:
    """A report of `done` of `total` (in `unit`, "B" for bytes) for one piece of long work.

    Feed it with `update(done, detail)` (absolute) or `advance(n)` (relative) from any thread,
    end it with `close()` (success) or `close(error)`; used as a context manager, leaving the
    block closes it, with the exception if one escapes. Updates after the close are ignored.

    Without `renderer` the config key `progress` decides whether and when the report shows (see
    the module); `delay` overrides the key's delay (`SHOW_AFTER` under "auto", none under
    "always"). With `renderer` the report is shown after `delay` (default: at once) whatever
    the key says. A renderer that raises is dropped (the report goes inert, with one logged
    warning): a progress display never fails the work it reports on.
    """

    def __init__(
        self,
        title: str,
        total: int,
        unit: str = "",
        *,
        renderer: Renderer | None = None,
        delay: float | None = None,
    ) -> None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise ValueError(f"Progress {title!r} needs a total >= 0 (an int), got {total!r}.")
        if delay is not None and not delay >= 0:
            raise ValueError(f"Progress {title!r} needs a delay >= 0 seconds, got {delay!r}.")
        self._start = time.monotonic()
        self._state = ProgressState(title, total, unit, 0, "")
        self._lock = threading.Lock()
        self._closed = False
        self._shown = False
        self._timer: threading.Timer | None = None
        self._renderer: Renderer | None = renderer
        if renderer is None:
            mode = _mode()
            if mode == "off" or (mode == "auto" and _in_a_proc()):
                return
            try:
                candidate = _factory()
            except Exception:
                logger.warning("Progress %r is not shown: its renderer could not be made.",
                               title, exc_info=True)
                return
            if mode == "auto" and not candidate.watched:
                return
            self._renderer = candidate
            if delay is None:
                delay = SHOW_AFTER if mode == "auto" else 0.0
        if not delay:
            self._reveal()
            return
        self._timer = threading.Timer(delay, self._reveal)
        self._timer.daemon = True
        self._timer.name = f"monarch-progress-{title}"
        self._timer.start()

    @property
    def active(self) -> bool:
        """Whether this report can show anything (False: inert, it shows nothing)."""
        return self._renderer is not None

    @property
    def shown(self) -> bool:
        """Whether the renderer got a state yet (False while the work is fast, or inert)."""
        return self._shown

    @property
    def done(self) -> int:
        """How much is done, as last updated."""
        return self._state.done

    def update(self, done: int, detail: str = "") -> None:
        """`done` of the total are done now; `detail` says more ("pending", a host name)."""
        with self._lock:
            self._set(done, detail)

    def advance(self, n: int = 1) -> None:
        """`n` more are done (the detail stays)."""
        with self._lock:
            self._set(self._state.done + n, self._state.detail)

    def _set(self, done: int, detail: str) -> None:
        """Record and show a new state (the caller holds the lock)."""
        if self._closed:
            return
        state = replace(self._state, done=done, detail=detail)
        if state == self._state:
            return
        self._state = state
        if self._shown:
            self._render(state)

    def close(self, error: BaseException | str | None = None, detail: str = "done") -> None:
        """End the report: done (the renderer's last line says `detail` and how long it took),
        or failed with `error`. A report that was never shown stays silent; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if not self._shown or self._renderer is None:
                return
            elapsed = time.monotonic() - self._start
            state = self._state
            if error is not None:
                why = str(error) or type(error).__name__  # KeyboardInterrupt() says nothing
                final = replace(state, detail=f"failed: {why}", final=True, failed=True)
            else:
                took = f"in {elapsed:.1f}s"
                if state.unit == "B" and elapsed > 0:
                    took += f" ({format_bytes(state.total / elapsed)}/s)"
                final = replace(state, done=state.total,
                                detail=f"{detail} {took}" if detail else took, final=True)
            self._state = final
            self._render(final)

    def _reveal(self) -> None:
        """Show the report (after the delay): the renderer gets the current state."""
        with self._lock:
            if self._closed or self._shown or self._renderer is None:
                return
            self._shown = True
            self._render(self._state)

    def _render(self, state: ProgressState) -> None:
        """Hand `state` to the renderer (the caller holds the lock); a failing renderer is
        dropped, never raised into the work."""
        renderer = self._renderer
        if renderer is None:
            return
        try:
            (renderer.finish if state.final else renderer.show)(state)
        except Exception:
            self._renderer = None
            logger.warning("Progress %r stopped showing: its renderer failed.", state.title,
                           exc_info=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(exc)
