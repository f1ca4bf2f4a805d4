"""`ActorMesh.upgrade(NewClass)`: swapping the code of running actors, all ranks or none.

This module is each actor's side of it (run on the actor's thread); `upgrade_caller.py` drives
the phases from the caller.

torchmonarch 0.7.0 has no such operation: this is an extension (for a class redefined in a
notebook cell). It runs in two phases, so that the mesh never ends half upgraded:

1. *prepare*: the caller posts `upgrade_actor` to every rank. Each actor keeps a deep copy of
   its state, becomes an instance of the new class and runs its `__upgrade__(old_state)`, then
   answers and holds its inbox (no other message runs) until phase 2. An actor whose
   `__upgrade__` raises goes back to its old class and state at once and answers the error.
2. *decide*: once every rank answered, the caller posts `upgrade_decision` to every rank:
   commit if all succeeded, else abort, and each rank that upgraded goes back to its old class,
   endpoints and state (the copy: what `__upgrade__` changed in nested objects is undone too).
   The caller's future completes once every rank applied the decision; after an abort it
   raises an `ActorError` naming the mesh, the failing ranks and their exceptions, and the
   caller's view of the mesh has the old class again, as every rank has.

Calls sent after the upgrade queue behind it and run on whichever class the decision left.
State that cannot be deep-copied (a lock, a thread, a socket) is kept by reference in the
copy: an abort restores those attributes as they are. An actor that waits for the decision is
released (as by an abort) when it is stopped, so a caller that died leaves no actor stuck.

Rejected: letting each rank keep the outcome of its own `__upgrade__` (as a first version did):
a failure on some ranks left the others on the new class while the caller's view went back to
the old one.
"""

from __future__ import annotations

import copy
import inspect
import logging
from typing import TYPE_CHECKING, Any, NamedTuple

from monarch._src.mesh import inbox
from monarch._src.mesh.actor import EndpointProperty, endpoints_of
from monarch._src.mesh.interruption import call_hiding_loop
from monarch._src.runtime.envelope import decode
from monarch._src.supervision.errors import SupervisionError

if TYPE_CHECKING:
    from monarch._src.mesh.hosted import HostedActor

__all__ = ["Backup", "abandon", "decide", "prepare"]

logger = logging.getLogger(__name__)


# ---- the actor's side (its thread, except `decide` and `abandon`) -------------------------

class Backup(NamedTuple):
    """What an actor goes back to when its upgrade is aborted."""

    actor_class: type
    state: dict[str, Any]  # a deep copy of its `__dict__` (see `_snapshot`)
    endpoints: dict[str, EndpointProperty]


def _snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of an actor's `__dict__`; an attribute that cannot be copied is kept by
    reference (objects shared between attributes then stop being shared in the copy)."""
    try:
        return copy.deepcopy(state)
    except Exception:  # noqa: BLE001 - some attribute does not copy: copy them one by one
        pass
    out: dict[str, Any] = {}
    for name, value in state.items():
        try:
            out[name] = copy.deepcopy(value)
        except Exception:
            out[name] = value
    return out


def prepare(host: HostedActor, msg: inbox.Upgrade) -> Any:
    """Phase 1 on one actor: become an instance of the new class and run its `__upgrade__`;
    returns what the actor thread awaits (the wait for the decision), or None."""
    rank = host.info.rank
    if host.failure is not None or host.obj is None:
        host.mailbox.reply_error(msg.reply, host.failure or _never_initialized(host), rank)
        return None
    try:
        new_class = decode(msg.payload)
    except Exception as exc:
        host.mailbox.reply_error(msg.reply, host.actor_error("upgrade", exc), rank)
        return None
    obj = host.obj
    backup = Backup(type(obj), _snapshot(obj.__dict__), host.endpoints)
    try:
        obj.__class__ = new_class
    except TypeError as exc:  # a layout __class__ assignment refuses (slots, builtins)
        host.mailbox.reply_error(msg.reply, host.actor_error("upgrade", exc), rank)
        return None
    host.endpoints = endpoints_of(new_class)
    hook = getattr(obj, "__upgrade__", None)
    if hook is None:
        return _await_decision(host, backup, msg.reply)
    if inspect.iscoroutinefunction(hook):
        return _upgrade_async(host, hook, backup, msg.reply)
    try:
        call_hiding_loop(host.thread.loop, hook, dict(obj.__dict__))
    except Exception as exc:
        _refuse(host, backup, msg.reply, exc)
        return None
    return _await_decision(host, backup, msg.reply)


async def _upgrade_async(host: HostedActor, hook: Any, backup: Backup, reply: Any) -> None:
    try:
        await hook(dict(host.obj.__dict__))
    except Exception as exc:
        _refuse(host, backup, reply, exc)
        return
    await _await_decision(host, backup, reply)


def _refuse(host: HostedActor, backup: Backup, reply: Any, exc: Exception) -> None:
    """`__upgrade__` raised: back to the old class, state and endpoints, and say why."""
    _restore(host, backup)
    host.mailbox.reply_error(reply, host.actor_error("__upgrade__", exc), host.info.rank)


def _restore(host: HostedActor, backup: Backup) -> None:
    obj = host.obj
    obj.__class__ = backup.actor_class
    obj.__dict__.clear()
    obj.__dict__.update(backup.state)
    host.endpoints = backup.endpoints


async def _await_decision(host: HostedActor, backup: Backup, reply: Any) -> None:
    """Answer phase 1, then hold the inbox until the caller's decision (phase 2)."""
    decision = host.thread.loop.create_future()
    host.upgrade_decision = decision  # before the answer, so the decision always finds it
    host.mailbox.reply(reply, None, host.info.rank)
    try:
        commit, ack = await decision
    finally:
        host.upgrade_decision = None
    if not commit:
        _restore(host, backup)
    if ack is not None:
        host.mailbox.reply(ack, None, host.info.rank)


def decide(host: HostedActor, commit: bool, ack: Any) -> None:
    """The caller's decision reached this actor's proc (runtime loop): apply it on the actor's
    thread, then acknowledge on `ack`."""
    host.thread.loop.call_soon_threadsafe(_apply, host, commit, ack)


def abandon(host: HostedActor) -> None:
    """The actor is being stopped (runtime loop): an upgrade waiting for its decision is
    aborted, so the stop is not queued behind a decision that may never come."""
    host.thread.loop.call_soon_threadsafe(_apply, host, False, None)


def _apply(host: HostedActor, commit: bool, ack: Any) -> None:
    decision = host.upgrade_decision
    if decision is not None and not decision.done():
        decision.set_result((commit, ack))
    elif ack is not None:  # nothing waits here (its __upgrade__ failed, or it was stopped)
        host.mailbox.reply(ack, None, host.info.rank)


def _never_initialized(host: HostedActor) -> BaseException:
    return SupervisionError(f"{host.display} cannot be upgraded: it was never initialized")
