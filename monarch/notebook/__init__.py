"""monarch.notebook: the notebook as controller.

Imported automatically when `monarch.actor` is imported inside IPython/Jupyter (`install()`):

* `asyncio.run(...)` works in a cell although the kernel runs an event loop (nest-asyncio), so
  code written for scripts, such as `asyncio.run(procs.logging_option(...))`, runs unchanged;
  top-level `await` works as in any IPython cell.
* What procs print reaches the output of the cell that caused it: log forwarding is on under
  IPython, and after each cell `flush_logs()` waits until every line the procs wrote during the
  cell was written to it.
* `MeshView(mesh)` shows the ranks of an actor or proc mesh as a live grid coloured by state, and
  `spawn_progress(proc_mesh)` a bar of procs coming up (`monarch.notebook.widgets`);
  `FetchView(mesh.endpoint, *args)` picks a point of the mesh and shows what the endpoint
  returns there (`monarch.notebook.fetch`); `AdminView()` shows hosts, procs and actors with
  their state, message rates and recent failures, and `stacks(mesh, rank)` dumps a proc's
  threads (`monarch.notebook.admin`); `dashboard(state)` frames the job's Monarch Dashboard
  (`monarch.notebook.dashboard_view`). They need ipywidgets, which is imported only when one of
  them is first used.
* The future of an endpoint's `call()` shows, as a cell's value, a live grid of its ranks
  (pending, done, failed with the error on hover) and a summary "3/4 done, 1 failed, 2.1 s"
  (`FutureView(fut)`, `monarch.notebook.future_widget`); `fut.partial()` and `for point, value
  in fut` give the replies so far.
* `%%mesh procs` (or a slice, `%%mesh procs[gpus=0:2]`) runs a cell on every proc of a mesh, in
  a per-proc namespace that persists between cells, output prefixed by rank; `%mesh_result`
  returns the last values as a ValueMesh (`monarch.notebook.magics`). `%load_ext
  monarch.notebook` installs all of this in a shell where `monarch.actor` was not imported yet.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = [
    "AdminView", "FetchView", "FutureView", "MeshView", "dashboard", "flush_logs", "install",
    "spawn_progress", "stacks",
]

_WIDGETS = {
    "MeshView": "widgets",
    "spawn_progress": "widgets",
    "FetchView": "fetch",
    "FutureView": "future_widget",
    "AdminView": "admin",
    "stacks": "admin",
    "dashboard": "dashboard_view",
}


def __getattr__(name: str) -> Any:
    # The widgets import ipywidgets, which `install()` (run on every `import monarch.actor`
    # under IPython) must not need.
    if name in _WIDGETS:
        import importlib

        return getattr(importlib.import_module(f"monarch.notebook.{_WIDGETS[name]}"), name)
    raise AttributeError(f"module 'monarch.notebook' has no attribute {name!r}.")


logger = logging.getLogger(__name__)
_installed = False


def flush_logs(timeout: float = 10.0) -> None:
    """Wait until every line the procs of this process wrote so far reached its output."""
    from monarch._src.lowlevel import agents

    for agent in agents():
        if not agent.is_local:  # remote hosts' lines come when they come
            continue
        try:
            agent.flush_logs().result(timeout=timeout)
        except Exception as exc:  # reported, but it must not break the notebook
            why = (f"it did not finish within {timeout:g}s" if isinstance(exc, TimeoutError)
                   else f"{type(exc).__name__}: {exc}")
            logger.warning("monarch: the procs' output of this cell may be incomplete: the log "
                           "flush failed (%s)", why)


def _future_view(future: Any) -> dict[str, Any] | None:
    """What a cell shows for the future of an endpoint's `call()`: a live `FutureView`
    (hook slot `future_view`); None, so the plain repr shows, where ipywidgets is missing."""
    try:
        from monarch.notebook.future_widget import mimebundle
    except ImportError:
        return None
    return mimebundle(future)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext monarch.notebook`: what `install()` does, and the `%%mesh` magics on this
    shell even if monarch was installed into another one first."""
    from monarch.notebook.magics import register

    install(ipython)
    register(ipython)


def install(ipython: Any = None) -> None:
    """Hook monarch into the running IPython kernel (idempotent)."""
    global _installed
    if _installed:
        return
    if ipython is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        ipython = get_ipython()
    if ipython is None:
        return
    _installed = True
    from monarch.notebook.magics import register

    register(ipython)  # %%mesh and %mesh_result
    try:
        import nest_asyncio  # type: ignore[import-untyped]  # nest_asyncio ships no types

        nest_asyncio.apply()
    except ImportError:  # asyncio.run in cells needs the notebook extra; await works regardless
        pass
    from monarch.notebook.progress import install as install_progress

    install_progress()  # progress reports as a bar in the running cell
    from monarch.notebook.interrupt import install as install_interrupt

    install_interrupt(ipython)  # an interrupted wait shows one line
    if getattr(ipython, "kernel", None) is not None:  # a frontend that can draw widgets
        from monarch._src.lowlevel import hooks

        hooks.future_view.install(_future_view)  # a call's future as a cell's value: live grid
    ipython.events.register("post_run_cell", lambda *_: flush_logs())
