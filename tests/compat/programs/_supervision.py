"""Helpers the supervision programs share (a helper module: ``run.py`` does not run it).

A recording `unhandled_fault_hook` (`record_faults`, read back with `hooked`), `brief` to cut the
parts of failure texts that differ between implementations, `get` for a future's outcome, and
fresh procs per scenario (`spawn_fresh`, `stop_fresh_procs`). Actors of the programs call `brief`
and `get` on their workers too: this module is importable there, since the harness puts
``programs/`` on ``PYTHONPATH``. Importing it changes nothing: the hook is installed by
`record_faults`.
"""

import queue
import re

from compat import outcome

import monarch.actor
from monarch.actor import this_host

__all__ = [
    "WAIT",
    "brief",
    "get",
    "hooked",
    "no_other_faults",
    "record_faults",
    "spawn_fresh",
    "stop_fresh_procs",
]

WAIT = 60.0  # seconds any single wait may take before the check reports a hang

_failures: "queue.Queue[str]" = queue.Queue()
_fresh_procs: list = []  # every proc mesh spawn_fresh made, for stop_fresh_procs


def record_faults(*, with_report: bool) -> None:
    """Make `monarch.actor.unhandled_fault_hook` queue each failure of the program's own meshes
    (as `brief` text, followed by `| report: ` and the brief report if `with_report`)."""

    def hook(failure) -> None:
        # Monarch 0.7.0 also reports its own per-proc "logger" meshes and calls bouncing off a
        # failed actor as undeliverable (with random addresses); keep the user's meshes.
        text = str(failure)
        if failure.mesh_name.startswith("logger") or "undeliverable message" in text:
            return
        if with_report:
            text = brief(text) + " | report: " + brief(failure.report())
        else:
            text = brief(text)
        _failures.put(text)

    monarch.actor.unhandled_fault_hook = hook


def hooked(n: int) -> list:
    """The next n failures the recording hook received, sorted (ranks report in any order)."""
    return sorted(_failures.get(timeout=WAIT) for _ in range(n))


def no_other_faults() -> bool:
    """True when the recording hook holds no failure that `hooked` did not take."""
    return _failures.empty()


def brief(text: str) -> str:
    """The text with each traceback cut to its header and its last line, and mesh names
    without the random suffix torchmonarch appends."""
    text = re.sub(r"(mesh_name=[A-Za-z_]+)-[A-Za-z0-9]+", r"\1", text)
    out: list[str] = []
    skip_deeper_than: int | None = None
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        if skip_deeper_than is not None:
            if indent > skip_deeper_than or not line.strip():
                continue
            skip_deeper_than = None
            out.append(" " * indent + "...")
        out.append(line)
        if line.endswith("Traceback (most recent call last):"):
            skip_deeper_than = indent
    return "\n".join(out)


def get(fut) -> str:
    """`ExcType: brief message` for what waiting on fut raises, or `returned <value>`."""
    return brief(outcome(fut.get, timeout=WAIT))


def spawn_fresh(name: str, cls: type, *args, gpus: int = 1):
    """An actor mesh on new procs: Monarch 0.7.0 refuses to spawn on a proc mesh that has seen
    a failure ("Cannot spawn new actors on mesh with supervision events")."""
    procs = this_host().spawn_procs(per_host={"gpus": gpus})
    _fresh_procs.append(procs)
    return procs.spawn(name, cls, *args)


def stop_fresh_procs() -> None:
    """Stop every proc mesh `spawn_fresh` made."""
    for procs in _fresh_procs:
        procs.stop().get()
    _fresh_procs.clear()
