"""`monarch debug`, `monarch stacks` and `monarch top` against a real client in another process:
driven by pipes, and in a real terminal through tmux."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monarch._src.admin.client import Server, find_server, request
from tests.debug.cli_helpers import PYTHON, Tmux, cli, server_address, start_app, stop, wait_until

pytestmark = [pytest.mark.timeout(90)]

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _paused(address: Server, n: int) -> list[dict[str, Any]]:
    return wait_until(lambda: (lambda s: s if len(s) == n else None)(
        request(address, {"op": "list"})["sessions"]), f"{n} paused actors")


def test_debug_cli_over_pipes_lists_attaches_and_resumes(tmp_path: Path) -> None:
    app = start_app("debug", tmp_path)
    try:
        address = server_address(tmp_path, app)
        assert find_server(directory=str(tmp_path)) == address
        _paused(address, 2)
        script = "list\nattach worker 1\np doubled\ndoubled = 7\nc\nattach 0\nc\nquit\n"
        done = cli(["monarch.tools.commands.debug"], tmp_path, stdin=script)
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert re.search(r"0\s+worker\s+0\s+breakpoint\s+\S*actors.py:\d+ in compute", out)
        assert re.search(r"1\s+worker\s+1\s+breakpoint", out)
        assert "(Pdb) p doubled\n40\n" in out
        assert out.count("resumed ---") == 2
        # After the last actor resumed the client may already have exited.
        assert out.rstrip().endswith(("no paused actors\nmonarch_dbg> quit", "has exited"))
        wait_until(lambda: app.poll() is not None, "the client to exit")
        stdout, _ = stop(app)
        assert "RESULT [41, 8]" in stdout  # rank 1 used the value set in the debugger
    finally:
        stop(app)


def test_debug_cli_attach_flag_and_bad_target(tmp_path: Path) -> None:
    app = start_app("debug", tmp_path)
    try:
        address = server_address(tmp_path, app)
        _paused(address, 2)
        port = str(address[1])
        bad = cli(["monarch.tools.commands.debug", "--port", port], tmp_path,
                  stdin="attach nobody 0\nquit\n")
        assert "No paused session for actor nobody rank 0" in bad.stdout
        for rank in ("0", "1"):
            done = cli(["monarch.tools.commands.debug", "--port", port, "--attach", "worker", rank],
                       tmp_path, stdin="c\n")
            assert done.returncode == 0 and f"worker rank {rank} resumed" in done.stdout
        wait_until(lambda: app.poll() is not None, "the client to exit")
        assert "RESULT [41, 41]" in stop(app)[0]
    finally:
        stop(app)


def test_debug_cli_without_client_says_how_to_fix(tmp_path: Path) -> None:
    done = cli(["monarch.tools.commands.debug", "--port", "1"], tmp_path)
    assert done.returncode == 1
    assert "No monarch client is serving debug/admin requests at localhost:1" in done.stderr


@needs_tmux
def test_debug_cli_in_tmux_terminal(tmp_path: Path) -> None:
    app = start_app("debug", tmp_path)
    term = None
    try:
        address = server_address(tmp_path, app)
        _paused(address, 2)
        term = Tmux(f"{PYTHON} -m monarch.tools.commands.debug", tmp_path)
        term.wait_for("monarch_dbg>")
        assert re.search(r"worker\s+1\s+breakpoint", term.screen())
        term.send("attach worker 0")
        term.wait_for("(Pdb)")
        term.send("p doubled + 2")
        term.wait_for("42")
        term.send("where")
        screen = term.wait_for("compute()")
        assert "actors.py" in screen and "monarch/_src" not in screen  # dispatch frames hidden
        term.send("continue")
        term.wait_for("worker rank 0 resumed")
        term.send("attach 0")
        term.wait_for("attached to <root>.<tests.debug.actors.Paused worker{'gpus': 1/2}>")
        term.send("c")
        term.wait_for("worker rank 1 resumed")
        tail = lambda: term.screen().split("worker rank 1 resumed")[-1]  # noqa: E731
        screen = wait_until(lambda: (lambda t: t if "EXITED-" in t or t.rstrip().endswith(
            "monarch_dbg>") else "")(tail()), "the shell prompt or its exit")
        if "EXITED-0" not in screen:  # the client was still there: leave the shell
            term.send("quit")
            term.wait_for("EXITED-0")
        wait_until(lambda: app.poll() is not None, "the client to exit")
        assert "RESULT [41, 41]" in stop(app)[0]
    finally:
        if term is not None:
            term.close()
        stop(app)


@pytest.fixture()
def serving(tmp_path: Path) -> Any:
    app = start_app("serve", tmp_path)
    try:
        address = server_address(tmp_path, app)
        wait_until(lambda: app.stdout.readline().startswith("READY"), "READY")  # type: ignore[union-attr]
        yield app, address
        app.stdin.write("go\n")  # type: ignore[union-attr]
        app.stdin.flush()  # type: ignore[union-attr]
        wait_until(lambda: app.poll() is not None, "the client to exit")
        assert "DONE True" in stop(app)[0]
    finally:
        stop(app)


def test_stacks_cli_shows_blocked_endpoint(serving: Any, tmp_path: Path) -> None:
    done = cli(["monarch.tools.commands.stacks", "gate", "0"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("=== gate[0]: proc ")
    assert "actor <root>.<tests.debug.actors.Gate gate{'gpus': 0/2}>" in out
    assert ", in block\n" in out and "_gate.wait(timeout=30)" in out
    assert "--- py-spy ---" in out or "(py-spy: " in out
    js = cli(["monarch.tools.commands.stacks", "--no-py-spy", "--json", "trainers", "1"], tmp_path)
    assert '"py_spy": null' in js.stdout and '"py_spy_note": "not requested"' in js.stdout
    missing = cli(["monarch.tools.commands.stacks", "nosuch", "0"], tmp_path)
    assert missing.returncode == 1
    assert "No mesh named 'nosuch' in this client (meshes: gate, opener, trainers, worker" in \
        missing.stderr
    out_of_range = cli(["monarch.tools.commands.stacks", "worker", "5"], tmp_path)
    assert "Mesh worker has no rank 5; its ranks are 0..1." in out_of_range.stderr


def test_top_once_prints_procs_and_actors(serving: Any, tmp_path: Path) -> None:
    done = cli(["monarch.tools.commands.top", "--once"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "PROCS (2)" in out and "ACTORS (6)" in out
    lines = out.splitlines()
    workers = [ln for ln in lines if ln.strip().startswith("worker")]
    assert len(workers) == 2 and all("running" in ln for ln in workers)
    # Three pings to each worker rank and their replies were counted.
    assert all(ln.split()[4:6] == ["3", "3"] for ln in workers)


@needs_tmux
def test_top_in_tmux_terminal_quits_on_q(serving: Any, tmp_path: Path) -> None:
    term = Tmux(f"{PYTHON} -m monarch.tools.commands.top --interval 0.2", tmp_path)
    try:
        screen = term.wait_for("RECENT FAILURES")
        assert "trainers[0]" in screen and "gate" in screen
        term.send("q", enter=False)
        term.wait_for("EXITED-0")
    finally:
        term.close()


def test_commands_register_with_argparse_and_stay_light() -> None:
    # What monarch.tools.cli does with each module of COMMANDS, in a fresh interpreter: the
    # parser is built without importing the runtime (distributed), and `func` is set.
    code = (
        "import argparse, importlib, sys\n"
        "parser = argparse.ArgumentParser(prog='monarch')\n"
        "sub = parser.add_subparsers(dest='command')\n"
        "for name in ('debug', 'stacks', 'top'):\n"
        "    importlib.import_module(f'monarch.tools.commands.{name}').register(sub)\n"
        "args = parser.parse_args(['stacks', 'worker', '3', '--no-py-spy'])\n"
        "print(args.func.__module__, args.mesh, args.rank, args.no_py_spy)\n"
        "args = parser.parse_args(['top', '--once', '--port', '5'])\n"
        "print(args.func.__module__, args.once, args.port)\n"
        "print('distributed' in sys.modules, 'monarch._src.runtime.runtime' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "monarch.tools.commands.stacks worker 3 True",
        "monarch.tools.commands.top True 5",
        "False False",
    ]
