"""`monarch._src.runtime.progress`: the renderers' exact output, the `progress` config key, the
show-after delay, and the report's own rules (close, context manager, arguments)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._src.lowlevel import (
    NullRenderer,
    Progress,
    ProgressState,
    TerminalRenderer,
    format_bytes,
    set_renderer_factory,
)
from monarch._src.runtime import progress as progress_module
from monarch.config import configure, configured, get_global_config

pytestmark = pytest.mark.timeout(30)


class Terminal(io.StringIO):
    """A captured stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Spy:
    """A watched renderer recording what it got; `shown` is set on the first state."""

    watched = True

    def __init__(self) -> None:
        self.states: list[ProgressState] = []
        self.shown = threading.Event()

    def show(self, state: ProgressState) -> None:
        self.states.append(state)
        self.shown.set()

    def finish(self, state: ProgressState) -> None:
        self.states.append(state)


@pytest.fixture
def spies() -> Iterator[list[Spy]]:
    """Every report created without a renderer gets a fresh `Spy`, listed here."""
    made: list[Spy] = []

    def factory() -> Spy:
        made.append(Spy())
        return made[-1]

    previous = set_renderer_factory(factory)
    try:
        yield made
    finally:
        set_renderer_factory(previous)


# ---- the terminal renderer ----------------------------------------------------------------


def test_terminal_renderer_on_a_tty_rewrites_one_line_and_ends_it() -> None:
    out = Terminal()
    p = Progress("procs up", 2, renderer=TerminalRenderer(out))
    p.update(1)
    p.update(1)  # unchanged: nothing written
    p.update(1, "host a")
    p.close(detail="")
    text = out.getvalue()
    head, _, last = text.rpartition("\r")
    assert head == ("\r[monarch] procs up: 0/2\x1b[K"
                    "\r[monarch] procs up: 1/2\x1b[K"
                    "\r[monarch] procs up: 1/2 host a\x1b[K")
    assert last.startswith("[monarch] procs up: 2/2 in ") and last.endswith("s\x1b[K\n")


def test_terminal_renderer_elsewhere_writes_only_the_first_and_last_state() -> None:
    out = io.StringIO()
    p = Progress("starting worker hosts", 3, renderer=TerminalRenderer(out))
    for done in (1, 2, 3):
        p.update(done)
    p.close(detail="worker hosts up")
    first, last, end = out.getvalue().split("\n")
    assert first == "[monarch] starting worker hosts: 0/3"
    assert last.startswith("[monarch] starting worker hosts: 3/3 worker hosts up in ")
    assert end == ""


def test_terminal_renderer_failure_line_names_the_error() -> None:
    out = io.StringIO()
    with pytest.raises(TimeoutError):
        with Progress("pods in namespace ns", 4, renderer=TerminalRenderer(out)) as p:
            p.update(3)
            raise TimeoutError("3 of 4 pods running")
    assert out.getvalue() == ("[monarch] pods in namespace ns: 0/4\n"
                              "[monarch] pods in namespace ns: 3/4 failed: 3 of 4 pods running\n")


def test_bytes_are_shown_in_binary_units_with_the_rate_at_the_end() -> None:
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536 << 10, 3 << 30, 5 << 50)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 MiB", "3.0 GiB", "5.0 PiB"]
    out = io.StringIO()
    with Progress("RDMA read", 256 << 20, "B", renderer=TerminalRenderer(out)) as p:
        p.advance(64 << 20)
    first, last, _ = out.getvalue().split("\n")
    assert first == "[monarch] RDMA read: 0 B/256.0 MiB"
    assert last.startswith("[monarch] RDMA read: 256.0 MiB/256.0 MiB done in ")
    assert last.endswith("/s)")
    state = ProgressState("sync", 3, "files", 1, "")
    assert state.text == "sync: 1/3 files"


def test_watched_defaults_to_the_stream_being_a_terminal() -> None:
    assert TerminalRenderer(Terminal()).watched is True
    assert TerminalRenderer(io.StringIO()).watched is False
    assert TerminalRenderer(io.StringIO(), watched=True).watched is True
    assert NullRenderer().watched is False


# ---- the progress config key and the delay ------------------------------------------------


def test_progress_key_defaults_to_auto_and_refuses_other_values() -> None:
    assert get_global_config()["progress"] == "auto"
    with pytest.raises(ValueError, match="'progress' expects 'auto'"):
        configure(progress="sometimes")
    with configured(progress="ALWAYS"):
        assert get_global_config()["progress"] == "always"


def test_auto_shows_nothing_for_work_done_before_the_delay(spies: list[Spy]) -> None:
    with configured(progress="auto"):
        with Progress("fast", 1, delay=60) as p:
            p.update(1)
    (spy,) = spies
    assert spy.states == [] and not p.shown


def test_auto_shows_work_still_running_after_the_delay(spies: list[Spy]) -> None:
    with configured(progress="auto"):
        p = Progress("slow", 3, delay=0.05)
        (spy,) = spies
        assert spy.shown.wait(10)  # the delay's timer showed the state of that moment
        p.update(2)
        p.close()
    assert [(s.done, s.final) for s in spy.states] == [(0, False), (2, False), (3, True)]
    assert spy.states[-1].detail.startswith("done in ")


def test_auto_waits_show_after_by_default(spies: list[Spy]) -> None:
    with configured(progress="auto"):
        p = Progress("slow", 1)
    assert p.active and not p.shown  # not at once: SHOW_AFTER (0.5 s) later
    p.close()
    assert spies[0].states == []


def test_auto_is_inert_where_nobody_watches_and_in_procs(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = set_renderer_factory(lambda: TerminalRenderer(io.StringIO()))
    try:
        with configured(progress="auto"):
            assert not Progress("piped", 1).active
    finally:
        set_renderer_factory(previous)

    class Proc:
        is_controller = False

    spy = Spy()
    previous = set_renderer_factory(lambda: spy)
    monkeypatch.setattr(progress_module, "runtime_if_started", lambda: Proc())
    try:
        with configured(progress="auto"):
            assert not Progress("in a proc", 1).active
        with configured(progress="always"):
            assert Progress("in a proc", 1).shown  # "always" shows in procs too
    finally:
        set_renderer_factory(previous)


def test_always_shows_every_report_at_once_even_in_a_log() -> None:
    out = io.StringIO()
    previous = set_renderer_factory(lambda: TerminalRenderer(out))
    try:
        with configured(progress="always"):
            with Progress("fast", 1) as p:
                p.update(1)
    finally:
        set_renderer_factory(previous)
    first, last, _ = out.getvalue().split("\n")
    assert first == "[monarch] fast: 0/1"
    assert last.startswith("[monarch] fast: 1/1 done in ")


def test_off_shows_nothing_and_the_report_is_inert(spies: list[Spy]) -> None:
    with configured(progress="off"):
        p = Progress("anything", 5)
    p.update(3)
    p.close()
    assert spies == [] and not p.active and not p.shown


def test_an_explicit_renderer_is_shown_whatever_the_key_says() -> None:
    spy = Spy()
    with configured(progress="off"):
        with Progress("asked for", 2, renderer=spy) as p:
            p.advance()
    assert [s.done for s in spy.states] == [0, 1, 2]


# ---- the report ---------------------------------------------------------------------------


def test_null_renderer_shows_nothing() -> None:
    with Progress("quiet", 2, renderer=NullRenderer()) as p:
        p.update(1)
    assert p.shown  # shown to a renderer that draws nothing


def test_updates_after_close_are_ignored_and_close_is_idempotent() -> None:
    spy = Spy()
    p = Progress("once", 2, renderer=spy)
    p.close(RuntimeError("boom"))
    p.update(1)
    p.close()
    assert [(s.done, s.failed, s.detail) for s in spy.states] == [
        (0, False, ""), (0, True, "failed: boom")]


def test_an_interrupt_is_named_when_it_says_nothing() -> None:
    spy = Spy()
    with pytest.raises(KeyboardInterrupt):
        with Progress("cell", 1, renderer=spy):
            raise KeyboardInterrupt
    assert spy.states[-1].detail == "failed: KeyboardInterrupt"


def test_advance_from_many_threads_counts_every_step() -> None:
    spy = Spy()
    p = Progress("chunks", 800, renderer=spy)
    threads = [threading.Thread(target=lambda: [p.advance() for _ in range(100)])
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert p.done == 800


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="Progress 'x' needs a total >= 0"):
        Progress("x", -1)
    with pytest.raises(ValueError, match="Progress 'x' needs a total >= 0"):
        Progress("x", 2.5)  # type: ignore[arg-type]  # the wrong type on purpose
    with pytest.raises(ValueError, match="Progress 'x' needs a delay >= 0"):
        Progress("x", 1, delay=-1)
    with pytest.raises(TypeError, match="set_renderer_factory takes a function"):
        set_renderer_factory("terminal")  # type: ignore[arg-type]  # the wrong type on purpose


def test_set_renderer_factory_returns_the_previous_one_and_none_restores_the_terminal() -> None:
    def mine() -> Any:
        return NullRenderer()

    original = set_renderer_factory(mine)
    try:
        assert set_renderer_factory(None) is mine
        assert set_renderer_factory(original) is TerminalRenderer
    finally:
        set_renderer_factory(original)


def test_terminal_renderer_keeps_a_multi_line_error_to_its_first_line() -> None:
    out = io.StringIO()
    p = Progress("procs up", 2, renderer=TerminalRenderer(out))
    p.close(RuntimeError("The actor <root>.setup failed:\n  Traceback ...\n  boom"))
    assert out.getvalue() == (
        "[monarch] procs up: 0/2\n"
        "[monarch] procs up: 0/2 failed: The actor <root>.setup failed: ...\n"
    )


def test_a_failing_renderer_is_dropped_and_never_fails_the_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("the terminal is gone")

    with Progress("RDMA read", 4, renderer=TerminalRenderer(Gone())) as p:
        p.advance(2)
        p.advance(2)
    assert not p.active and p.done == 4
    closed = io.StringIO()
    closed.close()  # even isatty() raises on it
    previous = set_renderer_factory(lambda: TerminalRenderer(closed))
    try:
        with configured(progress="always"):
            Progress("sync", 1).close()
    finally:
        set_renderer_factory(previous)

    def broken() -> Any:
        raise RuntimeError("no renderer here")

    previous = set_renderer_factory(broken)
    try:
        with configured(progress="always"):
            assert not Progress("spawn", 1).active
    finally:
        set_renderer_factory(previous)
    expected = ["Progress 'RDMA read' stopped showing: its renderer failed.",
                "Progress 'sync' stopped showing: its renderer failed.",
                "Progress 'spawn' is not shown: its renderer could not be made."]
    # (once a runtime runs in this process, log lines are prefixed with the actor)
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 3 and all(m.endswith(e) for m, e in zip(logged, expected)), logged
