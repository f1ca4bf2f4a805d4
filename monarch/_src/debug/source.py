"""The client's source for paused actors: code pickled by value (a function or class defined in
the client's `__main__`, a closure, a notebook cell) runs in procs whose hosts lack its file, so
pdb there could show no lines. `ensure_source(filename)` asks the root client's
`SourceLoaderController` (the controller named `source_loader`, spawned on first use) for the
text and puts it in `linecache`, where pdb's `list`, `where` and its stop lines read it.
"""

from __future__ import annotations

import linecache

from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.controller import get_or_spawn_controller

__all__ = ["SOURCE_LOADER_NAME", "SourceLoaderController", "ensure_source", "load_remote_source"]

SOURCE_LOADER_NAME = "source_loader"
_TIMEOUT = 30.0


class SourceLoaderController(Actor):
    """Serves the source the root client has for a file (what `linecache` finds there)."""

    @endpoint
    def get_source(self, filename: str) -> str:
        """The text of `filename` as this process knows it ("" when it does not)."""
        return "".join(linecache.getlines(filename))


def load_remote_source(filename: str) -> str:
    """The root client's source for `filename` (blocks; "" when the client has none)."""
    loader = get_or_spawn_controller(SOURCE_LOADER_NAME, SourceLoaderController).get(
        timeout=_TIMEOUT)
    source: str = loader.get_source.call_one(filename).get(timeout=_TIMEOUT)
    return source


def ensure_source(filename: str) -> bool:
    """Make `linecache` hold `filename`'s lines, from the client when this host lacks the file;
    whether it does now."""
    if linecache.getlines(filename):
        return True
    source = load_remote_source(filename)
    if not source:
        return False
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    return True
