"""One record per training step and rank, and where they go.

The launcher's hook on torchtitan's metrics calls `publish(record)` once per logged step. A
record is a plain dict (picklable, JSON-able):

    {"rank": 0, "pid": 4242, "step": 3, "loss": 7.41, "global_avg_loss": 7.43, "grad_norm": 1.9,
     "step_s": 2.8, "rss_peak_gib": 0.98}

`loss` is this rank's own mean loss over its tokens, `global_avg_loss` torchtitan's average
over all ranks (the same on every rank). Every record is printed as one `titan-step {json}`
line on stdout (what `monarch exec` forwards to the controller, prefixed with the rank), and
given to every listener registered in this process with `add_listener` (what `TitanReporter`
uses to push records to the controller's actor when the script runs in-process under
`monarch.spmd`). `parse_line` reads a printed record back; run as a script, this module reads
such output on stdin (e.g. piped from `monarch exec`) and prints one short line per record.

This module imports neither torch nor monarch: the controller imports it too.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

Record = dict[str, Any]
PREFIX = "titan-step "

_lock = threading.Lock()
_listeners: list[Callable[[Record], None]] = []


def add_listener(listener: Callable[[Record], None]) -> None:
    """Call `listener(record)` for every step published in this process from now on."""
    with _lock:
        _listeners.append(listener)


def remove_listener(listener: Callable[[Record], None]) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def publish(record: Record) -> None:
    """Print `record` as one line and hand it to every listener."""
    print(PREFIX + json.dumps(record, sort_keys=True), file=sys.stdout, flush=True)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(record)


def parse_line(line: str) -> Record | None:
    """The record in a printed line (any prefix before `titan-step ` is skipped), or None."""
    at = line.find(PREFIX)
    if at < 0:
        return None
    try:
        record = json.loads(line[at + len(PREFIX):])
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def format_record(record: Record) -> str:
    """A short human line: `rank 0 step 3 loss 7.4100 (global 7.4300) 2.80 s 0.98 GiB`."""
    return (
        f"rank {record['rank']} step {record['step']:3d} loss {record['loss']:.4f} "
        f"(global {record['global_avg_loss']:.4f}) {record['step_s']:.2f} s "
        f"{record['rss_peak_gib']:.2f} GiB"
    )


if __name__ == "__main__":
    for text in sys.stdin:
        found = parse_line(text)
        if found is not None:
            print(format_record(found), flush=True)
