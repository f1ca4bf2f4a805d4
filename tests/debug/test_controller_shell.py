"""The debug controller actor: the `monarch_dbg>` command parser, the session registry, the shell
on its terminal server (what `monarch debug` relays when no control server is published), and a
session spanning its endpoint call (an exception after a stop is debugged in it)."""

from __future__ import annotations

import io
import socket
import sys
import threading
from typing import Any

import pytest

from monarch._src.debug.command import Attach, Cast, Continue, ListCommand, parse_command
from monarch._src.debug.io import DebugIO
from monarch._src.debug.session import DebugSession, DebugSessions
from tests.debug.actors import Paused, StopsThenFails
from tests.debug.cli_helpers import wait_until

pytestmark = pytest.mark.timeout(60)


# ---- the parser -----------------------------------------------------------------------------
def test_parser_reads_each_command_form() -> None:
    assert parse_command("  attach trainer-2_x 7 ") == Attach("trainer-2_x", 7)
    assert parse_command("l") == ListCommand()
    assert parse_command("continue") == Continue()
    assert parse_command("cast w ranks(4) p x + 1") == Cast("w", 4, "p x + 1")
    assert parse_command("cast w ranks( 2 , 5 ) n") == Cast("w", [2, 5], "n")
    assert parse_command("cast w ranks(1::4) bt") == Cast("w", range(1, sys.maxsize, 4), "bt")
    assert parse_command("cast w ranks(hosts=(0,3), gpus=:2, x=1) up") == Cast(
        "w", {"hosts": [0, 3], "gpus": range(0, 2), "x": 1}, "up")


@pytest.mark.parametrize(("line", "says"), [
    ("attach w", "use: attach ACTOR_NAME RANK"),
    ("attach w -1", "use: attach ACTOR_NAME RANK"),
    ("list all", "'list' takes no arguments"),
    ("cast w ranks(1,2", "unclosed 'ranks('"),
    ("cast w ranks(1)", "cast needs a pdb command"),
    ("cast w ranks(3) ", "cast needs a pdb command"),
    ("cast w ranks(0:9:0) n", "step cannot be 0"),
    ("cast w ranks(7,) n", "is not a rank"),
    ("cast w ranks(gpus=(1)) n", "two or more"),
    ("step", "unknown command 'step'"),
])
def test_parser_says_what_is_wrong(line: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse_command(line)


class _Recorder(DebugIO):
    def __init__(self, lines: list[str]) -> None:
        self.lines = iter(lines)
        self.out: list[str] = []

    async def input(self, prompt: str = "") -> str:
        return next(self.lines)

    async def output(self, msg: str) -> None:
        self.out.append(msg)


async def test_parse_reports_errors_to_the_terminal() -> None:
    from monarch._src.debug.command import DebugCommand

    rec = _Recorder([])
    assert await DebugCommand.parse(rec, "attach") is None
    assert rec.out and rec.out[0].startswith("Error parsing input: use: attach")


# ---- sessions -------------------------------------------------------------------------------
async def test_session_replays_output_since_the_last_command_and_keeps_a_detached_read() -> None:
    sent: list[str] = []
    session = DebugSession(0, {"gpus": 0}, "h", "w", deliver=sent.append)
    session.write("> f(1)\n", "m.f", 1)
    session.write("(Pdb) ")
    session.request_input()
    first = _Recorder(["detach"])
    await session.attach(first)
    assert first.out[1:3] == ["> f(1)\n", "(Pdb) "] and sent == []
    second = _Recorder(["p 1"])
    session.write("1\n", "m.f", 2)
    session.end()
    await session.attach(second)
    # What the first attachment saw is shown again first; the kept read is dropped because
    # the session ended (nobody waits for an answer).
    assert second.out[1:4] == ["<last pdb output for w 0 follows>\n", "> f(1)\n", "(Pdb) "]
    assert second.out[4] == "1\n"
    assert sent == []  # the session ended before the read was answered: nothing is sent
    assert session.get_info().function == "m.f" and session.get_info().lineno == 2


def test_sessions_select_by_dimension_filters() -> None:
    sessions = DebugSessions()
    for rank in range(6):
        sessions.insert(DebugSession(rank, {"hosts": rank // 3, "gpus": rank % 3}, "h", "w"))
    picked = [s.rank for s in sessions.iter(("w", {"hosts": 1, "gpus": range(1, 3)}))]
    assert picked == [4, 5]
    assert [s.rank for s in sessions.iter(("w", [5, 0, 9]))] == [0, 5]
    assert list(sessions.iter(("nobody", None))) == []
    with pytest.raises(ValueError, match="Debug session for rank 2 already exists for actor w"):
        sessions.insert(DebugSession(2, {}, "h", "w"))


# ---- the controller actor -------------------------------------------------------------------
@pytest.fixture(scope="module")
def client() -> Any:
    from monarch._src.debug.controller import debug_controller, debug_controller_here

    debug_controller_here().ensure_server("localhost", 0)  # not 27000: tests run side by side
    dc = debug_controller()
    dc.announce = False
    return dc


def _terminal(client: Any) -> tuple[str, int]:
    host, port = client.server_address.call_one().get(timeout=30)
    return ("127.0.0.1" if host in ("0.0.0.0", "::") else host), port


def test_actor_id_carries_the_mesh_name(procs2: Any) -> None:
    mesh = procs2.spawn("named_one", StopsThenFails)
    try:
        assert set(mesh.actor_name.call().get(timeout=30).values()) == {"named_one"}
    finally:
        mesh.stop().get(timeout=30)


def test_exception_after_a_stop_is_debugged_in_the_same_session(client: Any,
                                                                procs2: Any) -> None:
    from monarch.actor import ActorError

    mesh = procs2.spawn("stopfail", StopsThenFails)
    try:
        fut = mesh.slice(gpus=1).run.call_one(4)
        transcript = client.attach("stopfail", 1, commands=["c", "p local_value", "c"],
                                   timeout=30, output=io.StringIO())
        assert "post-mortem of ValueError: failed after stop 5" in transcript
        assert "(Pdb) p local_value\n5\n" in transcript
        assert transcript.count("--- attached to") == 1
        assert transcript.rstrip().endswith("resumed ---")
        with pytest.raises(ActorError, match="failed after stop 5"):
            fut.get(timeout=30)
        assert all(i.name != "stopfail" for i in client.sessions())
    finally:
        mesh.stop().get(timeout=30)


def test_terminal_server_shell_lists_casts_and_continues(client: Any, procs2: Any) -> None:
    from monarch.tools.commands.debug import run_terminal

    mesh = procs2.spawn("shellpaused", Paused)
    try:
        fut = mesh.compute.call(3)

        def stopped() -> list[Any]:
            infos = [i for i in client.list.call_one(print_output=False).get(timeout=30)
                     if i.actor_name == "shellpaused"]
            # Where each stopped arrives with pdb's first output, after the registration.
            return infos if len(infos) == 2 and all(i.lineno for i in infos) else []

        infos = wait_until(stopped, "both ranks stopped")
        assert [(i.rank, i.coords, i.function) for i in infos] == [
            (0, {"gpus": 0}, "actors.compute"), (1, {"gpus": 1}, "actors.compute")]
        host, port = _terminal(client)
        out = io.BytesIO()
        script = (b"list\ncast shellpaused ranks(gpus=1) doubled = 50\nbogus\n"
                  b"attach shellpaused 1\np doubled\ndetach\ncontinue\nquit\n")
        done = threading.Event()
        status: list[int] = []

        def relay() -> None:
            status.append(run_terminal(host, port, io.BytesIO(script), out))
            done.set()

        threading.Thread(target=relay, daemon=True).start()
        assert done.wait(45), out.getvalue().decode()
        text = out.getvalue().decode()
        assert status == [0]
        assert "| shellpaused | 1 " in text and "actors.compute" in text
        assert "Error parsing input: unknown command 'bogus'" in text
        assert "(Pdb) 50\n" in text.replace("Attached to debug session", "")
        assert "Detached from debug session for shellpaused 1" in text
        assert "Quitting debug session" in text
        assert [v for _, v in fut.get(timeout=30).items()] == [7, 51]
    finally:
        for _ in range(2):  # a failed check left ranks paused: resume them
            if any(i.name == "shellpaused" for i in client.sessions()):
                client.attach("shellpaused", commands=[], timeout=1, output=io.StringIO())
        mesh.stop().get(timeout=30)


def test_terminal_relay_without_a_server_says_how_to_fix(
        capsys: pytest.CaptureFixture[str]) -> None:
    from monarch.tools.commands.debug import run_terminal

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert run_terminal("127.0.0.1", port, io.BytesIO(b""), io.BytesIO()) == 1
    assert f"No monarch client is serving debug/admin requests at 127.0.0.1:{port}" in (
        capsys.readouterr().err)
