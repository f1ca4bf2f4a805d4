"""`monarch top`: a terminal view of a running client's hosts, procs and actors.

Each refresh asks the client's control server for a snapshot, turns successive snapshots into
rates with `AdminModel`, and redraws the screen with ANSI escapes. On a terminal, stdin is put
in cbreak mode and waited on with `select` between refreshes, so `q` quits at once and the
refresh period is the only wait; on a pipe, each refresh is printed below the last (`--once`
prints one). Curses was rejected: it needs a terminfo entry and cannot print to a pipe.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from monarch._src.admin.model import AdminModel, Snapshot

__all__ = ["render", "run_top"]

_CLEAR = "\x1b[H\x1b[2J"


def _cut(text: str, width: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def render(view: Snapshot, width: int = 100) -> list[str]:
    """The lines of one screen for a sampled snapshot (see `AdminModel.sample`)."""
    stamp = time.strftime("%H:%M:%S", time.localtime(view["time"]))
    lines = [f"monarch top — {stamp}   (q quits)", ""]
    lines.append("HOSTS")
    for h in view["hosts"]:
        lines.append(f"  {h['name']}: {h['procs']} procs, {h['running']} running")
    lines.append("")
    lines.append(f"PROCS ({len(view['procs'])})")
    lines.append(f"  {'MESH':<16} {'RANK':>4} {'PID':>8} {'STATE':<9} ADDRESS")
    for p in view["procs"]:
        lines.append(_cut(f"  {p['mesh']:<16} {p['rank']:>4} {p['pid'] or '-'!s:>8} "
                          f"{p['state']:<9} {p['address']}", width))
    lines.append("")
    lines.append(f"ACTORS ({len(view['actors'])})")
    lines.append(f"  {'MESH':<16} {'RANK':>4} {'PROC':<12} {'STATE':<9} {'SENT':>8} {'REPLIES':>8} "
                 f"{'OUT/s':>8} {'IN/s':>8}")
    for a in view["actors"]:
        proc = f"{a['proc_mesh']}[{a['proc_rank']}]"
        lines.append(_cut(
            f"  {a['mesh']:<16} {a['rank']:>4} {proc:<12} {a['state']:<9} {a['sent']:>8} "
            f"{a['answered']:>8} {a.get('rate_out', 0.0):>8.1f} {a.get('rate_in', 0.0):>8.1f}",
            width))
    lines.append("")
    recent: list[dict[str, Any]] = view.get("recent_failures") or view["failures"]
    lines.append(f"RECENT FAILURES ({len(recent)})")
    for f in recent[-8:]:
        lines.append(_cut(f"  {f['kind']} {f['mesh']}[{f['rank']}]: {f['report']}", width))
    return lines


def _terminal_width(out: TextIO) -> int:
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError):
        return 100


def run_top(fetch: Callable[[], Snapshot], *, interval: float = 1.0, once: bool = False,
            iterations: int | None = None, stdin: TextIO | None = None,
            out: TextIO | None = None) -> int:
    """Draw snapshots from `fetch` every `interval` seconds until `q`, EOF, Ctrl-C,
    `iterations` screens, or (with `once`) one screen. Returns the exit status."""
    if interval <= 0:
        raise ValueError(f"monarch top needs --interval > 0, got {interval}.")
    out = out if out is not None else sys.stdout
    inp = stdin if stdin is not None else sys.stdin
    model = AdminModel(fetch)
    tty = not once and inp.isatty() and out.isatty()
    saved: Any = None
    if tty:
        import termios
        import tty as tty_mod

        saved = termios.tcgetattr(inp.fileno())
        tty_mod.setcbreak(inp.fileno())
    shown = 0
    try:
        while True:
            lines = render(model.sample(), _terminal_width(out))
            if tty:
                out.write(_CLEAR + "\r\n".join(lines) + "\r\n")
            else:
                out.write("\n".join(lines) + "\n\n")
            out.flush()
            shown += 1
            if once or (iterations is not None and shown >= iterations):
                return 0
            if tty:
                ready, _, _ = select.select([inp], [], [], interval)
                if ready:
                    key = os.read(inp.fileno(), 1)
                    if key in (b"q", b"Q", b"\x04", b""):
                        return 0
            else:
                time.sleep(interval)  # a pipe: the period between printed screens
    except KeyboardInterrupt:
        return 0
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(inp.fileno(), termios.TCSADRAIN, saved)
