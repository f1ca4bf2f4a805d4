"""`%%mesh` and `%mesh_result`: run a notebook cell on every proc of a mesh (the IPython side).

`%load_ext monarch.notebook` registers them; so does importing `monarch.actor` inside IPython.

* `%%mesh procs` runs the cell on every proc of the `ProcMesh` bound to `procs` in the notebook;
  `%%mesh procs[gpus=0:2]`, `procs[gpus=1]` or `procs[hosts=0, gpus=0:2]` on a slice (the
  bracket is `ProcMesh.slice`'s keywords: an int or `start:stop[:step]` per dimension, parsed
  with `ast`, never evaluated). The name may be dotted (`job.procs`). An `ActorMesh` is refused:
  the cell runs on procs, so name the proc mesh the actors were spawned on.
* Each proc keeps a namespace per notebook that persists between cells, with `rank` (the proc's
  flat rank in the named mesh) and `coords` (its coordinates there, a dict); see
  `monarch.notebook.mesh_magic`, whose `MeshMagic` actor (spawned as `_mesh_magic` the first time
  a mesh is named) runs the cells.
* Once every rank finished, what each printed is shown in rank order, each line prefixed
  `[rank 0] ` (stdout) or `[stderr:rank 1] ` (stderr), then each rank's value of the final
  expression as `Out[rank 0]: <repr>`.
* `%mesh_result` returns the last cell's values as a `ValueMesh` shaped like the targeted mesh
  or slice (a `RankError` in place of the value where the cell raised).
* `%mesh_why [--py-spy] [--no-stacks] [--json]` is hang triage (`monarch why` in the notebook):
  every actor rank's stack and calls in flight, grouped, outliers named ("3 ranks of trainer in
  `all_reduce`; rank 2 of trainer in `load_batch` for 212 s"). It prints the report; with
  `--json` it returns the triage dict instead.
* If ranks raised, the cell fails with one `MeshCellError`: the failing ranks grouped by
  identical traceback, each group's remote traceback shown once.

Interrupting the kernel while a cell waits propagates the `KeyboardInterrupt` and cancels the
call: procs drop it if it has not started; a running cell stops at its next
`monarch.actor.check_cancelled()` (or `time.sleep`), else it is interrupted in its own code
half a second later, as any cancelled sync endpoint (`HostedActor.cancel`).
"""

from __future__ import annotations

import ast
import re
import sys
import uuid
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

if TYPE_CHECKING:
    from monarch._src.mesh.actor_mesh import ActorMesh
    from monarch._src.mesh.proc_mesh import ProcMesh
    from monarch._src.mesh.value_mesh import ValueMesh
    from monarch.notebook.mesh_magic import CellResult, RankError

__all__ = ["MeshCellError", "MeshMagics", "parse_target", "register"]

_WHY_FLAGS = {"--py-spy", "--no-stacks", "--json"}

USAGE = "usage: %%mesh NAME or %%mesh NAME[dim=INT, dim=START:STOP[:STEP], ...]"

_TARGET = re.compile(
    r"\s*(?P<name>[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*(?:\[(?P<dims>.*)\])?\s*\Z",
    re.DOTALL,
)


def _int_node(node: ast.expr | None, item: str) -> int | None:
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        value = None
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"%%mesh: {item!r} is not a dimension slice: use an int or "
                         f"start:stop[:step] with int bounds. {USAGE}")
    return value


def parse_target(line: str) -> tuple[str, dict[str, int | slice]]:
    """Split a `%%mesh` line into the variable name and the `slice` keywords of its bracket."""
    match = _TARGET.match(line)
    if match is None:
        raise UsageError(f"%%mesh needs the name of a ProcMesh, got {line.strip()!r}. {USAGE}")
    name = re.sub(r"\s+", "", match["name"])
    dims: dict[str, int | slice] = {}
    text = match["dims"]
    if text is None:
        return name, dims
    if not text.strip():
        raise UsageError(f"%%mesh {line.strip()}: empty brackets. {USAGE}")
    for item in text.split(","):
        dim, eq, value = item.partition("=")
        dim = dim.strip()
        if not eq or not dim.isidentifier():
            raise UsageError(f"%%mesh: {item.strip()!r} is not dim=value. {USAGE}")
        if dim in dims:
            raise UsageError(f"%%mesh: dimension {dim!r} is sliced twice in {line.strip()!r}.")
        try:
            index = ast.parse(f"_[{value}]", mode="eval").body
        except SyntaxError:
            raise UsageError(f"%%mesh: {item.strip()!r} is not dim=value. {USAGE}") from None
        assert isinstance(index, ast.Subscript)
        part = index.slice
        if isinstance(part, ast.Slice):
            dims[dim] = slice(_int_node(part.lower, item.strip()),
                              _int_node(part.upper, item.strip()),
                              _int_node(part.step, item.strip()))
        else:
            number = _int_node(part, item.strip())
            assert number is not None
            dims[dim] = number
    return name, dims


class MeshCellError(Exception):
    """A `%%mesh` cell raised on some ranks; `errors` holds one `RankError` per failing rank.

    Shown as one summary: the failing ranks grouped by identical remote traceback, each
    traceback once (IPython shows `_render_traceback_()` instead of this exception's own
    traceback, which would only show the magic's frames).
    """

    def __init__(self, errors: list[RankError], ranks: int) -> None:
        self.errors = errors
        groups: dict[str, list[RankError]] = {}
        for error in errors:
            groups.setdefault(error.traceback_text, []).append(error)
        lines = [f"{len(errors)} of {ranks} ranks failed"]
        for text, group in groups.items():
            numbers = ",".join(str(e.rank) for e in group)
            word = "ranks" if len(group) > 1 else "rank"
            lines.append(f"{word} {numbers}: {group[0].summary}")
            lines.append(text.rstrip("\n"))
        self.summary = "\n".join(lines)
        super().__init__(self.summary)

    def _render_traceback_(self) -> list[str]:
        return f"MeshCellError: {self.summary}".splitlines()


def _resolve(shell: Any, name: str) -> Any:
    head, *rest = name.split(".")
    if head not in shell.user_ns:
        raise UsageError(
            f"%%mesh: no variable {head!r} in the notebook. Bind a ProcMesh to it first, e.g. "
            f"{head} = this_host().spawn_procs(per_host={{'gpus': 2}})."
        )
    obj = shell.user_ns[head]
    for attr in rest:
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise UsageError(f"%%mesh: {name!r}: {type(obj).__name__} has no attribute "
                             f"{attr!r}.") from None
    return obj


def _write(stream: Any, prefix: str, text: str) -> None:
    if not text:
        return
    stream.write("".join(f"{prefix}{line}\n" for line in text.splitlines()))
    stream.flush()


@magics_class
class MeshMagics(Magics):
    """The `%%mesh` cell magic and the `%mesh_result` line magic of one IPython shell."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.session = uuid.uuid4().hex  # keys this notebook's namespaces in the procs
        self.cells = 0  # `%%mesh` cells run so far: N of `<mesh-cell-N>`
        # (proc mesh id, global ranks, labels) -> the MeshMagic actors spawned on that mesh
        self.actors: dict[tuple[str, tuple[int, ...], tuple[str, ...]], ActorMesh[Any]] = {}
        self.last: ValueMesh[Any] | None = None

    def _target(self, line: str) -> tuple[ActorMesh[Any], ProcMesh]:
        from monarch._src.lowlevel import mesh_id
        from monarch._src.mesh.actor_mesh import ActorMesh
        from monarch._src.mesh.proc_mesh import ProcMesh
        from monarch.notebook.mesh_magic import MeshMagic

        name, dims = parse_target(line)
        procs = _resolve(self.shell, name)
        if isinstance(procs, ActorMesh):
            raise UsageError(
                f"%%mesh runs a cell on procs, and {name!r} is an ActorMesh: name the ProcMesh "
                "its actors were spawned on."
            )
        if not isinstance(procs, ProcMesh):
            raise UsageError(f"%%mesh: {name!r} is a {type(procs).__name__}, not a ProcMesh.")
        try:
            view = procs.slice(**dims) if dims else procs
        except (TypeError, IndexError, ValueError, KeyError) as exc:
            raise UsageError(f"%%mesh {line.strip()}: {exc}") from None
        key = (mesh_id(procs), tuple(s.proc_rank for s in procs.rank_states()),
               tuple(procs.extent.labels))
        actors = self.actors.get(key)
        if actors is None:
            spawned: Any = procs.spawn("_mesh_magic", MeshMagic)  # typed as the class, for users
            actors = self.actors[key] = spawned
        return (actors.slice(**dims) if dims else actors), view

    @cell_magic
    def mesh(self, line: str, cell: str) -> None:
        """Run the cell on every proc of a ProcMesh (or a slice): `%%mesh procs[gpus=0:2]`."""
        from monarch._src.mesh.value_mesh import ValueMesh
        from monarch._src.shape.shape import Shape
        from monarch._src.shape.slice import Slice

        actors, view = self._target(line)
        self.cells += 1
        call = actors.run.call(self.session, self.cells, cell)
        # Blocking is the point of a cell magic: no "blocks the event loop" warning. An
        # interrupt while waiting propagates (and cancels the call).
        call.wait(quiet=True)
        results: ValueMesh[CellResult] = call.outcome()
        outcomes = [result for _, result in results.items()]
        for result in outcomes:
            _write(sys.stdout, f"[rank {result.rank}] ", result.stdout)
            _write(sys.stderr, f"[stderr:rank {result.rank}] ", result.stderr)
            if result.value_repr is not None:
                sep = "\n" if "\n" in result.value_repr else " "
                _write(sys.stdout, "", f"Out[rank {result.rank}]:{sep}{result.value_repr}")
        extent = view.extent
        shape = Shape(list(extent.labels), Slice.new_row_major(list(extent.sizes)))
        self.last = ValueMesh(shape, [r.error if r.error is not None else r.value
                                      for r in outcomes])
        errors = [r.error for r in outcomes if r.error is not None]
        if errors:
            raise MeshCellError(errors, len(outcomes))

    @line_magic
    def mesh_result(self, line: str) -> ValueMesh[Any]:
        """The values of the last `%%mesh` cell, as a ValueMesh shaped like its target."""
        if line.strip():
            raise UsageError(f"%mesh_result takes no argument, got {line.strip()!r}.")
        if self.last is None:
            raise UsageError("%mesh_result: no %%mesh cell has run yet in this notebook.")
        return self.last

    @line_magic
    def mesh_why(self, line: str) -> dict[str, Any] | None:
        """Hang triage of this notebook's meshes: print where every rank is (see the module
        docstring); with `--json`, return the triage dict instead."""
        from monarch._src.admin.why import format_triage, triage

        flags = set(line.split())
        if flags - _WHY_FLAGS:
            raise UsageError(f"%mesh_why takes {', '.join(sorted(_WHY_FLAGS))}; got "
                             f"{' '.join(sorted(flags - _WHY_FLAGS))}.")
        result = triage(py_spy="--py-spy" in flags)
        if "--json" in flags:
            return result
        sys.stdout.write(format_triage(result, stacks="--no-stacks" not in flags))
        return None


def register(ipython: Any) -> None:
    """Register the magics on `ipython` (idempotent: a second call keeps the first instance,
    whose namespaces and last result the procs and `%mesh_result` refer to)."""
    registered = ipython.magics_manager.registry.get(MeshMagics.__name__)
    if isinstance(registered, MeshMagics):
        return
    ipython.register_magics(MeshMagics(ipython))
