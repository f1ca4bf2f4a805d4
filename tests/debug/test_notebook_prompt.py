"""In a real Jupyter kernel, `debug_controller().attach()` asks for pdb commands through the
kernel's stdin (an `input_request` a frontend shows in the cell)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]

_SETUP = """
from monarch.actor import this_host
from monarch._src.debug import debug_controller
from tests.debug.actors import Paused

procs = this_host().spawn_procs(per_host={"gpus": 1})
mesh = procs.spawn("nb", Paused)
debugger = debug_controller()
debugger.announce = False
"""

_DEBUG = """
fut = mesh.compute.call_one(20)
debugger.attach("nb", 0, timeout=30)
print("RESULT", fut.get(timeout=30))
"""


def test_attach_in_kernel_prompts_through_stdin(tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MONARCH_DEBUG_SERVER_PORT"] = "0"
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env,
                                       startup_timeout=60)
    try:
        _execute(client, textwrap.dedent(_SETUP), [])
        prompts: list[str] = []
        out = _execute(client, textwrap.dedent(_DEBUG), ["p doubled", "doubled = 1", "c"], prompts)
        assert prompts == ["(Pdb) ", "(Pdb) ", "(Pdb) "]
        assert "40\n" in out and "RESULT 2" in out
        _execute(client, "procs.stop().get(timeout=30)", [])
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _execute(client: Any, code: str, answers: list[str],
             prompts: list[str] | None = None) -> str:
    """Run `code`, answering each input request with the next of `answers`; the cell's
    stdout. Every wait is bounded by the client's message timeouts."""
    msg_id = client.execute(code, allow_stdin=bool(answers))
    pending = list(answers)
    while pending:
        request = client.get_stdin_msg(timeout=60)
        if request["msg_type"] == "input_request":
            if prompts is not None:
                prompts.append(request["content"]["prompt"])
            client.input(pending.pop(0))
    text = []
    while True:
        msg = client.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            text.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = client.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = client.get_shell_msg(timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(text)
