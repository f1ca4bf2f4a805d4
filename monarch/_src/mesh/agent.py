"""The proc agent's handlers of control operations (`control_ops.py`), installed in every
process's mailbox.

`spawn`, `actor_ready`, `stop_actor`, `upgrade_actor`/`upgrade_decision` (`upgrade.py`),
`supervise` and the relay's controls
(`relay.py`) run on the runtime loop of the process that receives them. They never block the
loop: work that waits (an actor's `__cleanup__`, a proc mesh still starting) is handed to the
actor's thread or to a callback.

Supervision: a `supervise` control reaches the process of the failed mesh's owner, whose
ownership tree decides whether it is delivered (once per failed rank, never for a stopped mesh).
An owning actor gets a `MeshFailure` in `__supervise__`, on its own thread; a falsy return or an
exception fails that actor too, which reports to its own owner. At the root the failure goes to
`monarch.actor.unhandled_fault_hook` (looked up through the `fault_hook` slot when it runs), on a
thread of its own; the default raises `SystemExit`, after which the report is written to stderr
and the main thread gets a SIGINT, so the program unwinds and its `atexit` handlers run.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from typing import Any

from monarch._src.mesh import hooks, inbox, observe, relay, upgrade
from monarch._src.mesh.control_ops import (
    ActorReady,
    Cancel,
    Ping,
    Spawn,
    StopActor,
    Supervise,
    UpgradeActor,
    UpgradeDecision,
)
from monarch._src.mesh.hosted import HostedActor, UndeliverableMessage
from monarch._src.mesh.ownership import ROOT, tree
from monarch._src.mesh.spawn_info import SpawnInfo
from monarch._src.runtime import runtime as _runtime_module
from monarch._src.runtime.envelope import Call, PortAddr
from monarch._src.runtime.runtime import Runtime
from monarch._src.supervision.errors import MeshFailure, SupervisionError
from monarch._src.telemetry import record

__all__ = ["install_agent"]

logger = logging.getLogger(__name__)


def install_agent(rt: Runtime) -> None:
    """Register the control operations of the proc agent in `rt`'s mailbox."""
    mailbox = rt.mailbox

    def spawn(peer: str, op: Spawn, reply: PortAddr | None) -> None:
        if not isinstance(op.info, SpawnInfo):
            raise TypeError("spawn expects a SpawnInfo")
        HostedActor(mailbox, op.info, op.payload, rt.proc_id).start()

    def actor_ready(peer: str, op: ActorReady, reply: Any) -> None:
        key, rank = op.key, op.rank

        def found(actor: Any) -> None:
            if isinstance(actor, HostedActor):
                actor.thread.enqueue(inbox.Ready(inbox.READY, reply, rank))
            else:
                mailbox.reply_error(reply, actor.error, rank)

        def missing() -> None:
            mailbox.reply_error(reply, SupervisionError(f"actor {key} was never spawned here"),
                                rank)

        # A mesh spawned by another process may be asked before that spawn arrives here.
        mailbox.when_actor(key, found, missing)

    def stop_actor(peer: str, op: StopActor, reply: PortAddr | None) -> None:
        actor = mailbox.actors.get(op.key)
        if isinstance(actor, HostedActor) and not actor.thread.stopped.is_set():
            upgrade.abandon(actor)  # an upgrade waiting for its decision would hold the stop
            actor.thread.enqueue(inbox.Stop(inbox.STOP, op.reason, reply))
        elif reply is not None:
            mailbox.reply(reply, None, 0)

    def upgrade_actor(peer: str, op: UpgradeActor, reply: Any) -> None:
        actor = mailbox.actors.get(op.key)
        if isinstance(actor, HostedActor):
            actor.thread.enqueue(inbox.Upgrade(inbox.UPGRADE, op.payload, reply))
        else:
            error = getattr(actor, "error", None) or SupervisionError(
                f"actor {op.key} does not exist on this proc ({mailbox.address})")
            mailbox.reply_error(reply, error)

    def upgrade_decision(peer: str, op: UpgradeDecision, reply: Any) -> None:
        actor = mailbox.actors.get(op.key)
        if isinstance(actor, HostedActor):
            upgrade.decide(actor, op.commit, reply)
        else:  # gone since it answered phase 1: nothing is left to roll back here
            mailbox.reply(reply, None)

    def supervise(peer: str, op: Supervise, reply: PortAddr | None) -> None:
        owner_key, mesh_key, rank, report = op.owner_key, op.mesh_key, op.rank, op.report
        if mesh_key is not None and tree.knows(mesh_key):
            # The tree delivers each failed rank once, and nothing about a stopped mesh.
            delivery = tree.rank_failed(mesh_key, rank, report)
            if delivery is None:
                return
            owner_key = None if delivery.owner == ROOT else delivery.owner
        failure = MeshFailure(op.mesh_name, [rank], report)
        if owner_key is None:
            _root_fault(failure)
            return
        owner = mailbox.actors.get(owner_key)
        if isinstance(owner, HostedActor):
            owner.thread.enqueue(inbox.Supervise(inbox.SUPERVISE, failure))
        else:
            logger.error("monarch: a failure for the gone actor %s was dropped: %s", owner_key,
                         failure)

    def cancel(peer: str, op: Cancel, reply: PortAddr | None) -> None:
        # After the CALL it cancels (one writer per peer), so an actor not spawned yet has it
        # queued by the time this reaches it.
        port = op.port
        mailbox.when_actor(
            op.key, lambda actor: actor.cancel(port) if isinstance(actor, HostedActor) else None,
            lambda: None)

    def ping(peer: str, op: Ping, reply: Any) -> None:
        mailbox.reply(reply, None)

    def undeliverable(env: Call, err: BaseException) -> None:
        message = UndeliverableMessage(env.actor_key, env.method, env.rank, str(err))
        sender = env.sender
        actor = mailbox.actors.get(sender) if sender is not None else None
        if isinstance(actor, HostedActor):
            actor.thread.enqueue(inbox.Undeliverable(inbox.UNDELIVERABLE, message))
        elif sender is None:
            _root_fault(MeshFailure(env.actor_key, [env.rank], f"RootClientActor: {message}"))

    mailbox.on_undeliverable.install(undeliverable)
    relay.install(mailbox)  # `relay`: a cast to this proc's host, handed to its procs
    control = mailbox.control
    control.register(Cancel, cancel)
    control.register(UpgradeActor, upgrade_actor)
    control.register(UpgradeDecision, upgrade_decision)
    control.register(Ping, ping)
    control.register(Spawn, spawn)
    control.register(ActorReady, actor_ready)
    control.register(StopActor, stop_actor)
    control.register(Supervise, supervise)


class _FaultHookRunner:
    """Runs `monarch.actor.unhandled_fault_hook` for failures that reached the root client.

    One thread takes failures in arrival order, so the hook is called exactly once per fault
    and never concurrently with itself. The hook is looked up at call time so users can
    replace it. Returning drops the fault; raising anything makes it fatal, as in Monarch: the
    report goes to stderr and the main thread gets a `KeyboardInterrupt`, so the program
    unwinds there and its `atexit` handlers run (a program that catches it carries on).
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[MeshFailure] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, failure: MeshFailure) -> None:
        self._queue.put(failure)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="monarch-fault-hook", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            failure = self._queue.get()
            lookup = hooks.fault_hook.get()
            # The root client handles a message: Processing, then back to Client.
            root = observe.root_status("Processing") if record.SINK is not None else None
            try:
                if lookup is None:  # no facade loaded: the default hook's outcome
                    raise SystemExit(1)
                lookup()(failure)
            except BaseException:
                _fatal(failure)
            finally:
                if root is not None:
                    observe.actor_status(root, "Client")


_fault_hook = _FaultHookRunner()


def _root_fault(failure: MeshFailure) -> None:
    _fault_hook.submit(failure)


def _fatal(failure: MeshFailure) -> None:
    """An unhandled fault: report it (Monarch's words) and interrupt the main thread."""
    import datetime
    import os
    import signal
    import socket

    sys.stderr.write(
        f"Unhandled monarch error on the root actor, hostname={socket.gethostname()}, "
        f"PID={os.getpid()} at time {datetime.datetime.now()}:\n{failure.report()}\n"
    )
    sys.stderr.flush()
    main = threading.main_thread()
    if main.is_alive() and main.ident is not None:
        # A real SIGINT to the main thread also wakes it from a blocking wait (a lock, a
        # sleep, a socket), which `_thread.interrupt_main` alone would not.
        signal.pthread_kill(main.ident, signal.SIGINT)


_runtime_module.on_start.add(install_agent)
