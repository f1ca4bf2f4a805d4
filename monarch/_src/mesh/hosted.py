"""An actor living in this process: construction, dispatch, failure and stop.

The proc agent creates a `HostedActor` for each `spawn` it receives. The actor's first message is
its `__init__`; every later `CALL` envelope is dispatched to an endpoint on the actor's thread,
one at a time. Outcomes follow Monarch's table (contract §2.3): an `Exception` with a reply port
becomes an `ActorError` for the caller and the actor lives on; without a reply port, or for a
`BaseException`, the actor fails and its owner is told. A failed or stopped actor answers every
later call with a `SupervisionError` at once.

Cancellation (`cancellation.py`: a cancelled call is dropped, or its endpoint cancelled or
interrupted, under the interruption rule of `interruption.py`) and upgrades (`upgrade.py`) keep
their state in the `CallCancellation` and the `upgrade_decision` of each `HostedActor`.

Outcomes of one message:

    in the endpoint                             the caller gets      the actor
    returns                                     the value            lives
    raises Exception, with a reply port         ActorError           lives
    raises Exception, no reply port             -                    fails, owner told
      (`broadcast`, `send` without a port)
    raises Exception, explicit response port    SupervisionError     fails, owner told
    raises BaseException, or `__init__` raises  SupervisionError     fails, owner told

Sync endpoints and a sync `__init__` run with no event loop visible; async endpoints are awaited
to completion before the next message; only `@concurrent_endpoint` bodies run as tasks.

No call is left hanging: an actor answers for the ports it holds (`port.PortHolder`): the reply
port of each call it handles, explicit response ports until used or pickled on, and the ports
unpickled from its `__init__` and endpoint arguments (the newest `_HELD_PORTS_MAX` multi-use
ones). `_fail` sends the failure to the reply ports at once and to the multi-use ports after
`__cleanup__`, so what cleanup sends there comes first; calls that arrive later are answered on
the runtime loop. A failed actor whose `__init__` had completed runs
`__cleanup__(Exception("serving <actor id>: <reason>"))` once, on its thread (a later `stop()`
does not run it again), and stops the meshes it owns that still run, newest first. Once its
thread ended, a `_Tombstone` takes its mailbox slot and answers every call with its error.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import textwrap
import threading
import traceback
from collections import OrderedDict
from typing import Any

from monarch._src.config import duration_seconds
from monarch._src.mesh import hooks, inbox, observe, telemetry, upgrade
from monarch._src.mesh.actor import EndpointProperty, endpoints_of
from monarch._src.mesh.cancellation import CallCancellation
from monarch._src.mesh.context import (
    Instance,
    set_message_rank,
    set_thread_instance,
)
from monarch._src.mesh.control_ops import Supervise
from monarch._src.mesh.interruption import call_hiding_loop
from monarch._src.mesh.ownership import tree
from monarch._src.mesh.port import Port, receiving_ports, start_receiving, stop_receiving
from monarch._src.mesh.spawn_info import SpawnInfo, extent_of
from monarch._src.runtime.actor_thread import STOP, ActorThread
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import CALL, Call, decode
from monarch._src.runtime.mailbox import Mailbox
from monarch._src.shape import Point
from monarch._src.supervision.errors import (
    REPORT_HEAD,
    ActorError,
    FailureReport,
    SupervisionError,
    failure_event,
    failure_report,
)
from monarch._src.telemetry import record

__all__ = ["HostedActor", "UndeliverableMessage"]

logger = logging.getLogger(__name__)

class UndeliverableMessage:
    """What `Actor._handle_undeliverable_message` receives: a message this actor sent with no
    reply port, which could not be delivered."""

    __slots__ = ("dest", "error", "method", "rank")

    def __init__(self, dest: str, method: str, rank: int, error: str) -> None:
        self.dest = dest  # the key of the actor mesh it was sent to
        self.method = method  # the endpoint it was meant for
        self.rank = rank  # the rank within the cast
        self.error = error  # why it could not be delivered

    def __str__(self) -> str:
        return (f"a message to {self.dest}.{self.method} (rank {self.rank}) could not be "
                f"delivered: {self.error}")

    __repr__ = __str__


# How many multi-use ports (received in arguments) an actor answers for when it fails; older
# ones are forgotten, so an actor handed a fresh port per call does not grow without bound.
_HELD_PORTS_MAX = 1024
# How many distinct casts' `Point`s an actor keeps (`HostedActor._point`).
_POINTS_MAX = 64



class HostedActor:
    """One actor rank in this process. `enqueue` runs on the runtime loop; the rest on the
    actor's thread."""

    def __init__(self, mailbox: Mailbox, info: SpawnInfo, payload: Any, proc_id: str) -> None:
        self.mailbox = mailbox
        self.info = info
        self.obj: Any = None  # the user's actor object, once __init__ ran
        self.endpoints: dict[str, EndpointProperty] = {}
        self.failure: SupervisionError | None = None  # set once the actor failed or stopped
        self.spawn_rank = Point(info.rank, extent_of(info.labels, info.sizes))
        self.instance: Instance | None = None
        self.proc_id = proc_id
        self._payload = payload  # (class, args, kwargs), decoded on the actor's thread
        self._display = f"{info.creator.display}.<? {info.name}{self._rank_text()}>"
        self.thread = ActorThread(info.actor_key, self._handle, self._on_thread_exit)
        self._tasks: set[asyncio.Task[Any]] = set()  # running concurrent endpoint bodies
        # Ports this actor answers for, (address, rank) -> once: the reply port of each call it
        # is handling, explicit response ports until used or handed on, and the ports that
        # arrived in its arguments. When the actor fails each gets the failure, so no call and
        # no receiver waits on it forever (reply ports also when it stops).
        self._owed: dict[tuple[Any, int | None], bool] = {}
        # The multi-use ports among them (a `Channel` port), oldest first: an actor keeps
        # answering for the last `_HELD_PORTS_MAX` it received, so memory stays bounded.
        self._held: OrderedDict[tuple[Any, int | None], None] = OrderedDict()
        self._owed_lock = threading.Lock()
        # Queued calls already answered with the failure from another thread (by id).
        self._answered: set[int] = set()
        self._initialized = False  # True once the user's __init__ returned
        self._cleaned = False  # True once __cleanup__ ran (it runs at most once)
        self.cancellation = CallCancellation(mailbox, self.thread)  # which calls run, cancelled
        # Set while an upgrade of this actor waits for its caller's decision (`upgrade.py`):
        # resolved, on the actor's loop, with (commit, acknowledgement port).
        self.upgrade_decision: asyncio.Future[tuple[bool, Any]] | None = None
        # Telemetry (`observe`), while the job records it: this actor's id, and when each
        # queued CALL (by id) arrived.
        self.telemetry_id: int | None = None
        self._queued_us: dict[int, int] = {}
        # Per call, kept: the `Point` of each cast (`_point`), and whether each endpoint
        # function is a coroutine function (keyed by the function: an upgrade brings new ones).
        self._points: dict[Any, Point] = {}
        self._is_coro: dict[Any, bool] = {}

    def _rank_text(self) -> str:
        # As in Monarch's actor names: a singleton's (0-dimension) rank is not shown.
        return repr(self.spawn_rank) if self.spawn_rank.extent.labels else ""

    # ---- runtime loop side --------------------------------------------------------------

    def start(self) -> None:
        if record.SINK is not None:
            self.telemetry_id = observe.actor_created(self, self.mailbox.address)
        self.thread.start()
        self.thread.enqueue(inbox.Init(inbox.INIT))
        # After __init__'s turn: calls that arrived before the spawn are queued behind it.
        self.mailbox.add_actor(self.info.actor_key, self)

    def enqueue(self, env: Call) -> None:
        if self.failure is not None and env.kind == CALL:
            # A failed actor answers at once, even while a message of its still runs.
            self._reject(env)
            return
        if self.telemetry_id is not None:
            self._queued_us[id(env)] = observe.message_queued(self.telemetry_id)
        self.thread.enqueue(env)

    def cancel(self, reply: Any) -> None:
        """The caller of the call replying to `reply` cancelled it (runtime loop)."""
        if self.failure is not None or reply is None:
            return
        self.cancellation.cancel(reply)

    def cancelled(self) -> bool:
        """Whether the caller of the call being handled cancelled it (`context().cancelled`)."""
        return self.cancellation.running_cancelled()

    def _on_thread_exit(self) -> None:
        self.mailbox.loop.call_soon_threadsafe(self._retire)

    def _retire(self) -> None:
        """After the thread ended: a tombstone answers later calls; queued ones are rejected."""
        tomb = _Tombstone(self.mailbox, self.failure or _stopped_error(self._display))
        self.mailbox.actors[self.info.actor_key] = tomb
        self._answer_owed(tomb.error, multi_use=True)  # a failure whose cleanup never ran
        # What arrived after the thread's last message is answered here: calls fail, a stop
        # request is acknowledged (the actor is stopped), a readiness query gets the error.
        for msg in self.thread.queued():
            if isinstance(msg, Call):
                tomb.enqueue(msg)
            elif isinstance(msg, inbox.Stop) and msg.reply is not None:
                self.mailbox.reply(msg.reply, None, self.info.rank)
            elif isinstance(msg, inbox.Ready):
                self.mailbox.reply_error(msg.reply, tomb.error, msg.rank)
            elif isinstance(msg, inbox.Upgrade):
                self.mailbox.reply_error(msg.reply, tomb.error, self.info.rank)

    # ---- actor thread side --------------------------------------------------------------
    def _handle(self, msg: inbox.InboxMessage) -> Any:
        if isinstance(msg, Call):
            if self.failure is not None:
                self._queued_us.pop(id(msg), None)
                self._reject(msg)
                return None
            return self._call(msg)
        if isinstance(msg, inbox.Init):
            return self._init()
        if isinstance(msg, inbox.Stop):
            return self._stop(msg.reason, msg.reply)
        if isinstance(msg, inbox.Supervise):
            return self._supervise(msg.failure)
        if isinstance(msg, inbox.Cleanup):
            return self._cleanup_after_failure(msg.report)
        if isinstance(msg, inbox.Undeliverable):
            return self._undeliverable(msg.message)
        if isinstance(msg, inbox.Upgrade):
            return upgrade.prepare(self, msg)
        if isinstance(msg, inbox.Ready):
            if self.failure is not None:
                self.mailbox.reply_error(msg.reply, self.failure, msg.rank)
            else:
                self.mailbox.reply(msg.reply, None, msg.rank)
        return None

    def _init(self) -> Any:
        info = self.info
        if self.telemetry_id is not None:
            observe.actor_status(self.telemetry_id, "Initializing")
        try:
            with receiving_ports(self):
                cls, args, kwargs = decode(self._payload)
        except BaseException as exc:
            self._fail(f"actor {info.name} could not be created: {exc!r}", exc)
            return None  # (the actor thread awaits what a handler returns)
        self._payload = None
        class_name = f"{cls.__module__}.{cls.__qualname__}"
        self._display = f"{info.creator.display}.<{class_name} {info.name}{self._rank_text()}>"
        self.instance = Instance(
            name=info.name,
            class_name=class_name,
            rank=self.spawn_rank,
            creator=info.creator,
            actor_key=info.actor_key,
            proc_id=self.proc_id,
            display=self._display,
            host=self,
        )
        set_thread_instance(self.instance)
        set_message_rank(self.spawn_rank)
        self.endpoints = endpoints_of(cls)
        obj = cls.__new__(cls)
        self.obj = obj
        if inspect.iscoroutinefunction(cls.__init__):
            return self._guard_init(cls.__init__(obj, *args, **kwargs))
        try:
            call_hiding_loop(self.thread.loop, cls.__init__, obj, *args, **kwargs)
        except BaseException as exc:
            self._fail(_init_report(self._display, exc), exc)
            return None
        self._initialized_now()
        return None

    async def _guard_init(self, coro: Any) -> None:
        try:
            await coro
        except BaseException as exc:
            self._fail(_init_report(self._display, exc), exc)
            return
        self._initialized_now()

    def _initialized_now(self) -> None:
        self._initialized = True
        if self.telemetry_id is not None:
            observe.actor_status(self.telemetry_id, "Idle")

    def _call(self, env: Call) -> Any:
        method, payload, reply, cast = env.method, env.payload, env.reply, env.cast_rank
        queued_us = self._queued_us.pop(id(env), None) if self._queued_us else None
        cancellation = self.cancellation
        if cancellation.drop_queued(reply):
            return None
        point = self._points.get(cast)
        if point is None:
            point = self._point(cast)
        set_message_rank(point)
        previous = start_receiving(self)
        try:
            args, kwargs = decode(payload)
        except Exception as exc:
            if reply is not None:
                self._send_error(reply, cast[0], self.actor_error(method, exc))
            else:
                self._fail(f"{self._display} could not decode a message for {method}: {exc}", exc)
            return None
        finally:
            stop_receiving(previous)
        prop = self.endpoints.get(method)
        fn = getattr(self.obj, method, None)
        if fn is None:
            missing = AttributeError(f"{self._display} has no endpoint named {method!r}.")
            if reply is not None:
                self._send_error(reply, cast[0], self.actor_error(method, missing))
            return None
        explicit = prop is not None and prop._takes_port
        if explicit:
            port = None
            if reply is not None:
                port = Port._create(reply, cast[0], once=True)
                port._holder = self
                self.port_received(port)
            args = (port, *args)
            reply = None
        elif reply is not None:
            self._owe(reply, cast[0], True)
        if telemetry.OTEL and telemetry.tracing_active() and (prop is None or prop._instrument):
            fn = telemetry.instrument_endpoint(fn, self.info.name, method, cast[0])
        if self.telemetry_id is not None:
            fn = observe.record_handler(fn, self.telemetry_id, env.origin, method, queued_us)
        func = getattr(fn, "__func__", None)  # a bound method's function, kept by its class
        is_coro = self._is_coro.get(func) if func is not None else None
        if is_coro is None:
            is_coro = inspect.iscoroutinefunction(fn)
            if func is not None:
                self._is_coro[func] = is_coro
        if is_coro:
            concurrent = prop is not None and prop._concurrent
            coro = self._run_async(fn, args, kwargs, method, reply, cast[0], explicit, env,
                                   concurrent)
            if concurrent:
                task = self.thread.loop.create_task(coro)
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                if env.reply is not None:
                    cancellation.concurrent[env.reply] = task
                return None
            cancellation.running = env
            return coro
        cancellation.begin_sync(env)
        try:
            try:
                result = call_hiding_loop(self.thread.loop, fn, *args, **kwargs)
                if (done_hook := hooks.endpoint_done.get()) is not None:
                    done_hook(self)
            finally:
                cancellation.end_sync(env)
        except Exception as exc:
            if cancellation.was_cancelled(env.reply, exc):
                self._settle(env.reply, cast[0])
                return None
            self._outcome_error(method, exc, reply, cast[0], explicit)
            return None
        except BaseException as exc:
            if cancellation.was_cancelled(env.reply, exc):
                self._settle(env.reply, cast[0])
                return None
            self._outcome_base_error(method, exc, reply, cast[0])
            return None
        cancellation.ended(env.reply)
        if reply is not None:
            self._send_value(reply, cast[0], result, method)
        return None

    def _point(self, cast: tuple[int, tuple[str, ...], tuple[int, ...]]) -> Point:
        """The `message_rank` of calls cast with `cast` (rank, labels, sizes): one `Point` per
        distinct cast, kept (an actor sees the same few)."""
        if len(self._points) >= _POINTS_MAX:
            self._points.clear()
        point = self._points[cast] = Point(cast[0], extent_of(cast[1], cast[2]))
        return point

    async def _run_async(
        self, fn: Any, args: Any, kwargs: Any, method: str, reply: Any, rank: int, explicit: bool,
        call: Call, concurrent: bool = False,
    ) -> None:
        try:
            result = await fn(*args, **kwargs)
            if (done_hook := hooks.endpoint_done.get()) is not None:
                done_hook(self)
        except Exception as exc:
            self.cancellation.cancelled.discard(call.reply)
            self._outcome_error(method, exc, reply, rank, explicit)
            return
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and self.failure is not None:
                return
            if self.cancellation.was_cancelled(call.reply, exc):
                task = asyncio.current_task()
                uncancel = getattr(task, "uncancel", None)  # Python 3.11+
                if uncancel is not None and not concurrent:
                    uncancel()  # `_main` goes on with the next message, not cancelling
                self._settle(call.reply, rank)
                return
            if concurrent and reply is not None:
                # Monarch's concurrent endpoints forward even a BaseException to the caller
                # (their task wrapper answers the port); the actor lives on.
                if (error_hook := hooks.endpoint_error.get()) is not None:
                    error_hook(self, method, exc)
                self._send_error(reply, rank, ActorError(
                    exc, f"Actor call {self.info.name}.{method} failed with BaseException."))
                return
            self._outcome_base_error(method, exc, reply, rank)
            return
        finally:
            if concurrent:
                self.cancellation.concurrent.pop(call.reply, None)
            elif self.cancellation.running is call:
                self.cancellation.running = None
        self.cancellation.ended(call.reply)
        if reply is not None:
            self._send_value(reply, rank, result, method)

    def _outcome_error(
        self, method: str, exc: Exception, reply: Any, rank: int, explicit: bool
    ) -> None:
        if (error_hook := hooks.endpoint_error.get()) is not None:
            error_hook(self, method, exc)
        if reply is not None:
            self._send_error(reply, rank, self.actor_error(method, exc))
        else:
            # No reply port takes this outcome: the actor fails, its owner is told, and the
            # ports it holds (an explicit response port among them) get the failure.
            self._fail(failure_report(self._display, _aborted(exc)), exc)

    def _outcome_base_error(self, method: str, exc: BaseException, reply: Any, rank: int) -> None:
        if (error_hook := hooks.endpoint_error.get()) is not None:
            error_hook(self, method, exc)
        # The failure answers the reply port, with every other port this actor owes.
        self._fail(failure_report(self._display, _aborted(exc)), exc)

    def actor_error(self, method: str, exc: BaseException) -> ActorError:
        """The error a caller gets when `method` of this actor raised `exc`."""
        return ActorError(exc, f"Actor call {self.info.name}.{method} failed.")

    def _send_value(self, reply: Any, rank: int, value: Any, method: str) -> None:
        self._settle(reply, rank)
        try:
            self.mailbox.reply(reply, value, rank)
        except Exception as exc:  # the result could not be pickled
            self._send_error(reply, rank, self.actor_error(method, exc))

    def _send_error(self, reply: Any, rank: int | None, err: BaseException) -> None:
        self._settle(reply, rank)
        try:
            self.mailbox.reply_error(reply, err, rank)
        except Exception as exc:  # e.g. an exception whose arguments cannot be pickled
            fallback: BaseException
            if isinstance(err, ActorError):
                fallback = ActorError(RuntimeError(repr(err.exception)), err.message,
                                      err.exception_formatted)
            else:
                fallback = SupervisionError(f"{err} (and it could not be pickled: {exc})")
            self.mailbox.reply_error(reply, fallback, rank)

    def _reject(self, env: Call) -> None:
        reply = env.reply
        if id(env) in self._answered:
            self._answered.discard(id(env))
            return
        if reply is not None and self.failure is not None:
            self.mailbox.reply_error(reply, self.failure, env.rank)

    # ---- ports this actor answers for (the `PortHolder` protocol) -------------------------
    def port_received(self, port: Port[Any]) -> None:
        self._owe(port._addr, port._rank, port._once)

    def port_used(self, port: Port[Any]) -> None:
        if port._once:
            self._settle(port._addr, port._rank)

    def _owe(self, addr: Any, rank: int | None, once: bool) -> None:
        key = (addr, rank)
        with self._owed_lock:
            self._owed[key] = once
            if not once:
                self._held[key] = None
                self._held.move_to_end(key)
                if len(self._held) > _HELD_PORTS_MAX:
                    oldest, _ = self._held.popitem(last=False)
                    if self._owed.get(oldest) is False:
                        del self._owed[oldest]

    def _settle(self, addr: Any, rank: int | None) -> None:
        with self._owed_lock:
            self._owed.pop((addr, rank), None)

    def _answer_owed(
        self, err: SupervisionError, multi_use: bool, forget_rest: bool = False
    ) -> None:
        """Send `err` to the reply ports this actor still owes an answer and, with `multi_use`,
        to the multi-use ports it holds; `forget_rest` drops the others (any thread)."""
        with self._owed_lock:
            owed = [key for key, once in self._owed.items() if once or multi_use]
            if forget_rest:
                self._owed.clear()
                self._held.clear()
            else:
                for key in owed:
                    del self._owed[key]
                    self._held.pop(key, None)
        for addr, rank in owed:
            try:
                self.mailbox.reply_error(addr, err, rank)
            except Exception:  # the port's process is gone: nobody waits there any more
                logger.debug("monarch: could not answer port %s of %s", addr, self._display)

    def _answer_queued(self, err: SupervisionError) -> None:
        """Answer the calls queued behind a message that is still running (any thread)."""
        for env in self.thread.queued():
            if isinstance(env, Call) and env.reply is not None:
                self._answered.add(id(env))
                self.mailbox.reply_error(env.reply, err, env.rank)

    # ---- failure ------------------------------------------------------------------------
    def _fail(self, report: str, exc: BaseException | None) -> SupervisionError:
        """Mark this actor failed and tell its owner (once)."""
        if self.failure is not None:
            return self.failure
        self.failure = SupervisionError(report)
        if self.telemetry_id is not None:
            observe.actor_failed(self.telemetry_id, report)
        for task in list(self._tasks):
            task.cancel()
        # Everything still waiting on this actor resolves now: the calls it was handling, the
        # ports it holds and, when the failure comes from another thread while a message is
        # still running, the calls queued behind it.
        # On this thread, the multi-use ports (a `Channel` port) are answered after
        # `__cleanup__` ran, so what it sends there comes first, as in Monarch.
        on_thread = threading.current_thread() is self.thread.thread
        self._answer_owed(self.failure, multi_use=not on_thread)
        if not on_thread:
            self._answer_queued(self.failure)
        self.thread.enqueue(inbox.Cleanup(inbox.CLEANUP, report))
        creator = self.info.creator
        self.mailbox.post(
            creator.address,
            control(Supervise(creator.actor_key, self.info.name, self.info.actor_key,
                              self.info.rank, report)),
        )
        # A mesh cannot outlive its owner: what this actor owns stops, newest first. The stops
        # run in the background; this actor's thread goes on answering calls with the failure.
        for mesh in self._owned_still_running():
            try:
                mesh._stop_owned(f"its owner {self._display} failed")
            except Exception:  # its host is gone
                logger.debug("monarch: could not stop a mesh owned by %s", self._display)
        return self.failure

    def _owned_still_running(self) -> list[Any]:
        """The meshes this actor owns that still run, newest first (the ownership tree)."""
        if self.instance is None:
            return []
        by_key = {getattr(m, "_key", None) or m._id: m for m in self.instance.owned_meshes}
        return [by_key[k] for k in tree.owner_failed(self.info.actor_key) if k in by_key]

    def _undeliverable(self, message: UndeliverableMessage) -> None:
        """A message this actor sent bounced: the actor may swallow it, else it fails."""
        if self.failure is not None or self.obj is None:
            return
        try:
            handled = call_hiding_loop(
                self.thread.loop, self.obj._handle_undeliverable_message, message
            )
        except Exception as exc:
            self._fail(failure_report(
                self._display,
                f"{message}; handling it raised {type(exc).__name__}: {exc}"), exc)
            return
        if not handled:
            self._fail(failure_report(self._display, f"undeliverable message: {message}"), None)

    def abort(self, reason: str) -> None:
        self._fail(failure_report(self._display, f"actor explicitly aborted due to: {reason}"),
                   None)

    @property
    def display(self) -> str:
        """How failure reports and debug tools name this actor, Monarch's
        "<creator>.<module.Class name{rank}>"."""
        return self._display

    def request_stop(self, reason: str, reply: Any = None) -> None:
        """Stop after the messages already queued (`__cleanup__` runs); `reply` is answered."""
        self.thread.enqueue(inbox.Stop(inbox.STOP, reason, reply))

    def _supervise(self, failure: Any) -> Any:
        handler = getattr(self.obj, "__supervise__", None)
        if handler is None or self.failure is not None:
            return self._unhandled(failure, None)
        if inspect.iscoroutinefunction(handler):
            return self._supervise_async(handler, failure)
        try:
            handled = call_hiding_loop(self.thread.loop, handler, failure)
        except Exception as exc:
            return self._unhandled(failure, exc)
        if not handled:
            self._unhandled(failure, None)
        return None

    async def _supervise_async(self, handler: Any, failure: Any) -> None:
        try:
            handled = await handler(failure)
        except Exception as exc:
            self._unhandled(failure, exc)
            return
        if not handled:
            self._unhandled(failure, None)

    def _unhandled(self, failure: Any, exc: BaseException | None) -> None:
        """A child's failure this actor did not handle fails it too (Monarch's texts: calls
        to this actor see the child's report; its owner's event names both)."""
        child_report, child_event = failure.report(), failure_event_of(failure)
        if exc is not None:
            reason = f"{type(exc).__name__}: {exc}"
            report = FailureReport(
                failure_report(self._display, reason)
                + "\nThis error occurred while handling another failure:\n"
                + textwrap.indent(child_report, "  "),
                f"Supervision event: actor {self._display} failed:\n  {reason}\n"
                "This error occurred while handling a supervision event from its child. "
                "The event was:\n" + textwrap.indent(child_event, "  "),
            )
        else:
            report = FailureReport(
                child_report,
                f"Supervision event: actor {self._display} failed because it did not handle a "
                "supervision event from its child. The child's event was:\n"
                + textwrap.indent(child_event, "  "),
            )
        self._fail(report, exc)

    # ---- stop ---------------------------------------------------------------------------
    async def _stop(self, reason: str, reply: Any) -> None:
        if self.telemetry_id is not None and self.failure is None:
            observe.actor_status(self.telemetry_id, "Stopping")
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        error: BaseException | None = None
        for mesh in self._owned_still_running():
            try:
                await asyncio.wrap_future(mesh._stop_owned(reason))
            except Exception as exc:  # an owned mesh that fails to stop is reported below
                error = exc
        if self.failure is None:
            try:
                await self._run_cleanup(None)
            except Exception as exc:
                error = exc
        if self.failure is None:
            self.failure = _stopped_error(self._display, reason)
            if self.telemetry_id is not None:
                observe.actor_status(self.telemetry_id, "Stopped", reason)
        self._answer_owed(self.failure, multi_use=False, forget_rest=True)
        if reply is not None:
            if error is None:
                self.mailbox.reply(reply, None, self.info.rank)
            else:
                self.mailbox.reply_error(reply, self.actor_error("__cleanup__", error),
                                         self.info.rank)
        self.thread.enqueue(STOP)

    async def _run_cleanup(self, exc: Exception | None) -> None:
        """Run the user's `__cleanup__(exc)` once, on this thread, if `__init__` completed."""
        cleanup = getattr(self.obj, "__cleanup__", None)
        if cleanup is None or self._cleaned or not self._initialized:
            return
        self._cleaned = True
        if inspect.iscoroutinefunction(cleanup):
            await asyncio.wait_for(cleanup(exc), duration_seconds("cleanup_timeout"))
        else:
            call_hiding_loop(self.thread.loop, cleanup, exc)

    async def _cleanup_after_failure(self, report: str) -> None:
        """As in Monarch, a failed actor's `__cleanup__` gets an `Exception` saying why."""
        _head, _, reason = report.partition(REPORT_HEAD)
        reason = textwrap.dedent(reason) if reason else report
        where = f"{self.info.name}<{self.info.actor_key}>.{self.proc_id}@{self.mailbox.address}"
        try:
            await self._run_cleanup(Exception(f"serving {where}: {reason}"))
        except Exception:
            logger.exception("monarch: __cleanup__ of the failed actor %s raised", self._display)
        finally:
            if self.failure is not None:
                self._answer_owed(self.failure, multi_use=True)


class _Tombstone:
    """Stands in the mailbox for an actor that stopped: answers every call with `error`."""

    def __init__(self, mailbox: Mailbox, error: SupervisionError) -> None:
        self.mailbox = mailbox
        self.error = error

    def enqueue(self, env: Call) -> None:
        if env.kind == CALL and env.reply is not None:
            self.mailbox.reply_error(env.reply, self.error, env.rank)


def _stopped_error(display: str, reason: str = "stopped") -> SupervisionError:
    return SupervisionError(
        f"actor {display} has status: stopped ({reason}); actor mesh is stopped"
    )


def _init_report(display: str, exc: BaseException) -> str:
    return failure_report(display, _aborted(exc))


def _aborted(exc: BaseException) -> str:
    """The reason an actor failed because `exc` escaped one of its handlers: its traceback."""
    return "actor explicitly aborted due to: " + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )


def failure_event_of(failure: Any) -> str:
    """The supervision event a `MeshFailure` carries (its `str` shows it)."""
    event = getattr(failure, "event", None)
    return event if isinstance(event, str) else failure_event(failure.report())
