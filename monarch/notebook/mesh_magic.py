"""The proc side of `%%mesh`: a hidden actor that runs a notebook cell in a per-proc namespace.

`monarch.notebook.magics` spawns one `MeshMagic` actor (named `_mesh_magic`) on each proc mesh a
`%%mesh` cell names, the first time it names it, and calls `run` with the cell's source. The
cell runs as IPython runs one: the source is parsed with `ast`, the statements before a final
expression are exec'd and that expression is eval'd; its value is the cell's value on the rank.
The code is compiled with the filename `<mesh-cell-N>` (N counts the controller's `%%mesh`
cells) and its lines are put in `linecache`, so a traceback shows the cell's own lines.

The namespace is a dict living in the proc, keyed by the controller's session (one per IPython
shell), so it persists between cells, is shared by every `%%mesh` target that includes this proc
(a slice, another mesh over the same procs) and is independent of other controllers. Before each
cell it gets `rank` (this proc's flat, row-major rank in the named mesh, an int) and `coords`
(its coordinates there, a dict such as `{"hosts": 0, "gpus": 1}`); the cell may overwrite both.

What the cell prints through `sys.stdout`/`sys.stderr` from the endpoint's thread is captured and
returned with the value (`CellResult`); other threads of the proc print as before (with log
forwarding, to the controller's output, prefixed by the proc). Output written straight to the
file descriptors (C extensions, subprocesses) is not captured either.
"""

from __future__ import annotations

import ast
import builtins
import io
import linecache
import sys
import threading
import traceback
from typing import Any, TextIO

from monarch._src.lowlevel import encode
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import context
from monarch._src.mesh.interruption import interruptible

__all__ = ["CELL_FILENAME", "CellResult", "MeshMagic", "RankError", "namespace"]

CELL_FILENAME = "<mesh-cell-{}>"

# session id -> the namespace `%%mesh` cells of that controller session run in, in this proc.
_NAMESPACES: dict[str, dict[str, Any]] = {}
# session id -> filename -> source of each cell that session ran here. Cell numbers count per
# session, so two sessions on one proc reuse filenames: `linecache` gets the session's own
# sources back before one of its tracebacks is formatted.
_SOURCES: dict[str, dict[str, str]] = {}


def namespace(session: str) -> dict[str, Any]:
    """The namespace of `session`'s cells in this proc (created empty on first use)."""
    ns = _NAMESPACES.get(session)
    if ns is None:
        ns = {"__builtins__": builtins, "__name__": "__main__"}
        _NAMESPACES[session] = ns
    return ns


class RankError(Exception):
    """What a cell raised on one rank: the type's name, the message and the remote traceback
    (formatted in the proc, from the cell's first frame on).

    It stands in for the exception itself, which may not unpickle in the controller (its class
    may have been defined in an earlier cell); `%mesh_result` holds one at each failing rank.
    """

    def __init__(self, rank: int, type_name: str, message: str, traceback_text: str) -> None:
        super().__init__(rank, type_name, message, traceback_text)
        self.rank = rank
        self.type_name = type_name
        self.message = message
        self.traceback_text = traceback_text

    @property
    def summary(self) -> str:
        """`Type: message` (just `Type` for an exception without a message)."""
        return f"{self.type_name}: {self.message}" if self.message else self.type_name

    def __str__(self) -> str:
        return f"rank {self.rank}: {self.summary}"

    def __repr__(self) -> str:
        return f"RankError({self})"


class CellResult:
    """One rank's outcome of a cell: captured output, the value (or the error) and its repr.

    `value_repr` is None when the cell displays nothing on this rank (no final expression, its
    value is None, or the cell ends with `;`). A value that cannot be pickled back is replaced
    by its repr (`value` is then that string).
    """

    def __init__(
        self,
        rank: int,
        stdout: str,
        stderr: str,
        value: Any = None,
        value_repr: str | None = None,
        error: RankError | None = None,
    ) -> None:
        self.rank = rank
        self.stdout = stdout
        self.stderr = stderr
        self.value = value
        self.value_repr = value_repr
        self.error = error

    def __repr__(self) -> str:
        what = f"error={self.error}" if self.error is not None else f"value={self.value_repr}"
        return f"CellResult(rank={self.rank}, {what})"


class _ThreadRoutedStream(io.TextIOBase):
    """A `sys.stdout`/`sys.stderr` stand-in: writes from a thread that is capturing go to that
    thread's buffer, every other write to the stream it replaced."""

    def __init__(self, fallback: TextIO) -> None:
        self.fallback = fallback
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        buffer = self.buffers.get(threading.get_ident())
        if buffer is not None:
            return buffer.write(text)
        return self.fallback.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.fallback.flush()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fallback.fileno()

    def isatty(self) -> bool:
        return self.fallback.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase types it as a plain attribute
        return self.fallback.encoding

    def __getattr__(self, name: str) -> Any:
        # What TextIOBase does not define (`buffer`, `mode`, ...) is the replaced stream's:
        # bytes written to `sys.stdout.buffer` bypass the capture, as fd writes do.
        if name == "fallback":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.fallback, name)


_route_lock = threading.Lock()


def _routed(name: str) -> _ThreadRoutedStream:
    """`sys.<name>` as a routed stream, installing one over the current stream if needed."""
    with _route_lock:
        stream = getattr(sys, name)
        if not isinstance(stream, _ThreadRoutedStream):
            stream = _ThreadRoutedStream(stream)
            setattr(sys, name, stream)
        return stream


def _cache_lines(filename: str, source: str) -> None:
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _cell_traceback(exc: BaseException, filename: str, session: str) -> str:
    """The traceback of `exc` from the cell's first frame on (the exception alone when no frame
    is the cell's, as for a SyntaxError), with the lines of `session`'s cells."""
    for name, source in _SOURCES.get(session, {}).items():
        _cache_lines(name, source)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None:
        return "".join(traceback.format_exception_only(type(exc), exc))
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _picklable(value: Any) -> bool:
    """Whether the reply can carry `value` (encoded as replies are: tensors and arrays out of
    band, so the check copies no data)."""
    try:
        encode(value)
    except Exception:  # noqa: BLE001 - whatever pickling raises, the value cannot travel
        return False
    return True


@interruptible  # a cancelled cell is interrupted in its own code (nothing here holds a lock)
def run_cell(source: str, filename: str, ns: dict[str, Any]) -> Any:
    """Run `source` in `ns` as IPython runs a cell; return the final expression's value (None
    when the cell does not end with an expression)."""
    _cache_lines(filename, source)
    tree = ast.parse(source, filename=filename)
    last: ast.expr | None = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = final.value
    exec(compile(tree, filename, "exec"), ns)  # running the user's cell is the point
    if last is None:
        return None
    return eval(compile(ast.Expression(last), filename, "eval"), ns)


class MeshMagic(Actor):
    """Runs `%%mesh` cells on its proc (one actor per proc of each mesh a cell names)."""

    @endpoint
    @interruptible  # its `finally` only hands back this thread's capture buffers
    def run(self, session: str, cell: int, source: str) -> CellResult:
        """Run `source` in `session`'s namespace of this proc; never raises for the cell's own
        errors (they come back in the result, with the captured output)."""
        point = context().actor_instance.rank
        rank = point.rank
        ns = namespace(session)
        ns["rank"] = rank
        ns["coords"] = dict(point)
        filename = CELL_FILENAME.format(cell)
        _SOURCES.setdefault(session, {})[filename] = source
        out, err = _routed("stdout"), _routed("stderr")
        me = threading.get_ident()
        out.buffers[me] = io.StringIO()
        err.buffers[me] = io.StringIO()
        value: Any = None
        error: RankError | None = None
        try:
            value = run_cell(source, filename, ns)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the cell's error is its result
            # (a cancellation or an interrupt, BaseExceptions, propagates)
            text = _cell_traceback(exc, filename, session)
            error = RankError(rank, type(exc).__name__, str(exc), text)
        finally:
            stdout = out.buffers.pop(me).getvalue()
            stderr = err.buffers.pop(me).getvalue()
        if error is not None:
            return CellResult(rank, stdout, stderr, error=error)
        shown = value is not None and not source.rstrip().endswith(";")
        value_repr = repr(value) if shown else None
        if not _picklable(value):
            value = repr(value)
        return CellResult(rank, stdout, stderr, value, value_repr)
