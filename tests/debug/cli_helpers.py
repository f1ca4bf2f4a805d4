"""Helpers for the CLI tests: start the test client, find its control server, drive tmux.

Every wait polls a condition (a file, a server answer, a pane's text) until a deadline.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from monarch._src.admin.client import Server

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def wait_until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll `check` until it returns something truthy; its value. Raises after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)  # poll interval of a bounded condition wait


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    e = dict(os.environ)
    e.update(extra or {})
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e["MONARCH_DEBUG_SERVER_PORT"] = "0"  # a free port; the CLI reads .monarch/ to find it
    e["PYTHONUNBUFFERED"] = "1"
    return e


def start_app(mode: str, cwd: Path,
              extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([PYTHON, "-m", "tests.debug.app", mode], cwd=cwd, env=env(extra_env),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def server_address(cwd: Path, app: subprocess.Popen[str], timeout: float = 30.0) -> Server:
    path = cwd / ".monarch" / f"controller-{app.pid}.json"

    def published() -> Any:
        if app.poll() is not None:
            raise RuntimeError(f"the test client exited early: {app.stderr.read()}")  # type: ignore[union-attr]
        return path.exists()

    wait_until(published, f"{path} to be published", timeout)
    info = json.loads(path.read_text())
    return Server(info["host"], int(info["port"]), info["token"], info["tls"])


def cli(args: list[str], cwd: Path, stdin: str = "", timeout: float = 60.0,
        extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a `monarch` subcommand module with a clean environment (no server env vars)."""
    e = env(extra_env)
    e.pop("MONARCH_DEBUG_SERVER_PORT")
    return subprocess.run([PYTHON, "-m", *args], cwd=cwd, env=e, input=stdin, text=True,
                          capture_output=True, timeout=timeout)


class Tmux:
    """A private tmux server (its own socket) running one command in a 200x50 pane."""

    def __init__(self, command: str, cwd: Path) -> None:
        self.socket = f"monarch-test-{uuid.uuid4().hex[:8]}"
        e = env()
        e.pop("MONARCH_DEBUG_SERVER_PORT")
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in e.items()
                           if k in ("PYTHONPATH", "PATH", "HOME"))
        shell = f"cd {shlex.quote(str(cwd))} && env {exports} {command}; echo EXITED-$?; sleep 120"
        subprocess.run(["tmux", "-L", self.socket, "new-session", "-d", "-s", "t", "-x", "200",
                        "-y", "50", shell], check=True, timeout=30)

    def screen(self) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-t", "t",
                               "-S", "-200"], capture_output=True, text=True, timeout=30)
        return done.stdout

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        """The screen once it shows `text` (trailing blanks of lines are not captured)."""
        try:
            return wait_until(lambda: (lambda s: s if text in s else "")(self.screen()),
                              f"{text!r} on the tmux screen", timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; the screen shows:\n{self.screen()}") from None

    def send(self, keys: str, enter: bool = True) -> None:
        args = ["tmux", "-L", self.socket, "send-keys", "-t", "t", "-l", keys]
        subprocess.run(args, check=True, timeout=30)
        if enter:
            subprocess.run(["tmux", "-L", self.socket, "send-keys", "-t", "t", "Enter"],
                           check=True, timeout=30)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30)


def stop(app: subprocess.Popen[str]) -> tuple[str, str]:
    """End the test client (killing it if it is still running); its stdout and stderr."""
    if app.poll() is None:
        app.kill()
    out, err = app.communicate(timeout=30)
    return out, err


def live_files(cwd: Path) -> list[str]:
    return glob.glob(str(cwd / ".monarch" / "controller-*.json"))
