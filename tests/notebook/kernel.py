"""Driving a real Jupyter kernel from a test: run a cell, collect what it sent."""

from __future__ import annotations

from typing import Any


def execute(client: Any, code: str, stop_on_error: bool = True,
            seen: list[dict[str, Any]] | None = None,
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Execute `code`; return the shell reply's content and the iopub messages of that
    execution up to its idle status. Every iopub message read meanwhile, whatever its parent
    (a widget's update from another thread, say), is appended to `seen` if given.

    Pass `stop_on_error=False` for a cell that is meant to fail and is followed by another:
    ipykernel sends the error reply before it stops taking requests after an error (it aborts
    those already queued), so a request sent as soon as that reply came may be aborted too, on a
    loaded machine."""
    msg_id = client.execute(code, stop_on_error=stop_on_error)
    messages = []
    while True:
        msg = client.get_iopub_msg(timeout=60)
        if seen is not None:
            seen.append(msg)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = client.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = client.get_shell_msg(timeout=60)
    return reply["content"], messages


def run_cell(client: Any, code: str, seen: list[dict[str, Any]] | None = None,
             ) -> list[dict[str, Any]]:
    """Execute `code`, which must succeed; return its iopub messages up to idle."""
    reply, messages = execute(client, code, seen=seen)
    errors = [m["content"] for m in messages if m["msg_type"] == "error"]
    assert reply["status"] == "ok", (reply, errors)
    return messages
