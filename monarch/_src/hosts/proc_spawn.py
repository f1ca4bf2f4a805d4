"""Spawning on the local host: what a new proc is told (its spec), and the spawn watch.

`proc_spec` builds the part of a proc's spec shared by the procs of one `spawn_procs`: where to
report (`controller`, `root`), the controller's `sys.path`, working directory, environment and
runtime config, the encoded bootstrap, the output settings, the proc wiring to run (`setup`,
from the `proc_setup` hook slot) and, with `with_python_executable`, the interpreter.
`watch_spawn` fails the procs that do not come up within `mesh_proc_spawn_max_idle`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from monarch._src.config import get as config_get, runtime_snapshot
from monarch._src.mesh import hooks
from monarch._src.mesh.controller import root_address
from monarch._src.mesh.proc_mesh import ProcTable
from monarch._src.runtime.envelope import encode
from monarch._src.runtime.runtime import Runtime

__all__ = ["proc_spec", "watch_spawn"]


def proc_spec(rt: Runtime, bootstrap: Callable[[], Any] | None, python: str | None,
              overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The spec entries every proc of one spawn shares; `overrides` (a served host's: the
    client's root, listen address, config...) win."""
    return {
        "controller": rt.address,
        "root": root_address(rt),
        "sys_path": list(sys.path),
        # The client's installation: a proc of another Python leaves its paths out.
        "prefixes": sorted({sys.prefix, sys.base_prefix, sys.exec_prefix}),
        "cwd": os.getcwd(),
        "config": runtime_snapshot(),
        "bootstrap": encode(bootstrap) if bootstrap is not None else None,
        "env": dict(os.environ),
        # Merged value: under IPython it is on by default here, which a proc cannot see.
        "log_forwarding": bool(config_get("enable_log_forwarding")),
        "pdeathsig": bool(config_get("mesh_bootstrap_enable_pdeathsig")),
        "tail_log_lines": int(config_get("tail_log_lines")),
        "setup": hooks.proc_setup.get() or (),  # the proc wiring, run before it serves
        **({"python": python} if python else {}),
        **(overrides or {}),
    }


def watch_spawn(rt: Runtime, table: ProcTable, idle: float, *, closed: Callable[[], bool],
                give_up: Callable[[int, str], None]) -> None:
    """mesh_proc_spawn_max_idle (`idle`): procs still not ready after that long with no other
    proc of the mesh becoming ready meanwhile are given up: `give_up(rank, report)` (runtime
    loop; nothing happens once the table is stopped or `closed()`)."""

    def pending() -> list[int]:
        return [rank for rank in range(len(table.keys))
                if not table.is_up(rank) and rank not in table.failed]

    def check(before: int) -> None:
        waiting = pending()
        if not waiting or table.stopped is not None or closed():
            return
        if len(waiting) < before:  # progress: give the rest another `idle`
            rt.loop.call_later(idle, check, len(waiting))
            return
        for rank in waiting:
            give_up(rank, f"proc {table.proc_ids[rank]} did not become ready within "
                          f"mesh_proc_spawn_max_idle ({idle:g}s with no proc of its mesh "
                          f"becoming ready)")

    rt.loop.call_later(idle, check, len(pending()))
