"""`ActorMesh.upgrade(NewClass)`, the caller's side: it drives the two phases that `upgrade.py`
describes (and runs on each actor) over the ranks of a mesh, from any thread; the phases advance
on the runtime loop.

`ActorMesh.upgrade` is a descriptor (`actor_mesh.py`): it gives the endpoint instead when the actor
class has one named `upgrade`, so `upgrade` is not a reserved endpoint name. The new class is
validated as `spawn` validates, and encoded by value (`transport.serialization.by_value`), so a
class from an imported module travels with its new code.
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Any

from monarch._src.mesh import casting
from monarch._src.mesh.control_ops import UpgradeActor, UpgradeDecision
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import PORT_ERROR, Payload, decode
from monarch._src.runtime.future import Future
from monarch._src.runtime.ports import CountPort, PortEntry
from monarch._src.runtime.runtime import get_runtime
from monarch._src.supervision.errors import ActorError, format_remote_traceback

if TYPE_CHECKING:
    from monarch._src.mesh.actor_mesh import ActorMesh

__all__ = ["upgrade_mesh"]


class _Votes(PortEntry):
    """Phase 1's answers: one per rank, errors included (a `CountPort` stops at the first)."""

    def __init__(self, n: int) -> None:
        self.cf: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.missing = n
        self.answers: dict[int | None, tuple[int, Payload]] = {}
        self.lost: BaseException | None = None  # set when a rank's proc is gone
        if n == 0:
            self.closed = True
            self.cf.set_result(None)

    def deliver(self, payload: Payload, rank: int | None, status: int) -> None:
        if self.closed:
            return
        self.answers[rank] = (status, payload)
        self.missing -= 1
        if self.missing == 0:
            self.closed = True
            self.cf.set_result(None)

    def fail(self, exc: BaseException) -> None:
        if not self.closed:
            self.closed = True
            self.lost = exc
            self.cf.set_result(None)

    def failed(self) -> bool:
        return self.lost is not None or any(s == PORT_ERROR for s, _ in self.answers.values())


def upgrade_mesh(mesh: ActorMesh[Any], new_class: type, payload: Payload) -> Future[None]:
    """Run both phases over the ranks of `mesh` (the module's docstring); `payload` is the
    encoded `new_class`. The view `mesh` has `new_class` until an abort is known."""
    key, name = mesh._key, mesh._name
    cast = casting.plan(mesh)
    targets = tuple({cast.proc_of(r) for r in range(len(cast.ranks))})
    mailbox = get_runtime().mailbox
    votes = _Votes(len(cast.ranks))
    outcome: concurrent.futures.Future[_Votes] = concurrent.futures.Future()
    old_class = mesh._class
    mesh._set_class(new_class)

    def back_to_old() -> None:
        if mesh._class is new_class:
            mesh._set_class(old_class)

    def voted(_: Any) -> None:  # runtime loop
        commit = not votes.failed()
        if not commit:
            back_to_old()
        acks = CountPort(len(cast.ranks))
        reply = mailbox.open_port(acks, targets)
        casting.post_control(mesh, control(UpgradeDecision(key, commit), reply))
        # The decision's answers only order the outcome after it; an error there (a proc
        # gone) changes nothing the votes did not say.
        acks.cf.add_done_callback(lambda _: outcome.set_result(votes))

    votes.cf.add_done_callback(voted)
    reply = mailbox.open_port(votes, targets)
    casting.post_control(mesh, control(UpgradeActor(key, payload), reply))

    def result(done: _Votes) -> None:  # the reader's thread: decode the errors there
        if not done.failed():
            return None
        back_to_old()
        raise _abort_error(name, new_class, old_class, done)

    return Future.from_concurrent(outcome, result)


def _abort_error(name: str, new_class: type, old_class: type, votes: _Votes) -> ActorError:
    failures: list[tuple[int | None, BaseException]] = []
    for rank, (status, payload) in sorted(votes.answers.items(), key=lambda kv: kv[0] or 0):
        if status == PORT_ERROR:
            try:
                error = decode(payload)
            except Exception as exc:  # the error itself could not be decoded
                error = exc
            failures.append((rank, error))
    if votes.lost is not None:
        failures.append((None, votes.lost))
    ranks = [r for r, _ in failures if r is not None]
    causes = [e.exception if isinstance(e, ActorError) else e for _, e in failures]
    listed = "; ".join(
        f"rank {r if r is not None else '?'}: {type(c).__name__}: {c}"
        for (r, _), c in zip(failures, causes))
    message = (
        f"Upgrade of actor mesh {name} to {new_class.__qualname__} failed on ranks {ranks}"
        f"{' (and a proc is gone)' if votes.lost is not None else ''}: {listed}. "
        f"Every rank was rolled back to {old_class.__qualname__} and its state before the "
        "upgrade. Fix __upgrade__ and call upgrade again.")
    formatted = "\n".join(
        f"rank {r if r is not None else '?'}:\n"
        + (e.exception_formatted if isinstance(e, ActorError) else format_remote_traceback(e))
        for r, e in failures)
    return ActorError(causes[0], message, formatted)
