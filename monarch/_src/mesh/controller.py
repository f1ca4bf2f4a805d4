"""`get_or_spawn_controller`: process-wide singleton actors, by name, in the root client.

Controllers live in the root client's process (`this_proc()` there). The registry is kept by
the root's proc agent; lookups from any actor, anywhere, go to it as a control message, so a
controller spawned from inside another actor is the same one the client sees later.
"""

from __future__ import annotations

import threading
from typing import Any

from monarch._src.mesh.control_ops import GetOrSpawnController
from monarch._src.mesh.proc_mesh import this_proc
from monarch._src.runtime import runtime as _runtime_module
from monarch._src.runtime.control import control
from monarch._src.runtime.envelope import decode, encode
from monarch._src.runtime.future import Future
from monarch._src.runtime.ports import OncePort, decode_reply
from monarch._src.runtime.runtime import Runtime, get_runtime
from monarch._src.supervision.errors import ActorError

__all__ = ["get_or_spawn_controller"]

# What a failed lookup's ActorError says: torchmonarch names its controller-controller's call.
_SPAWN_FAILED = "Actor call controller_controller.get_or_spawn failed."
_lock = threading.Lock()
_controllers: dict[str, Any] = {}  # name -> ActorMesh, in the root client only


def get_or_spawn_controller(name: str, Class: type, *args: Any, **kwargs: Any) -> Future[Any]:
    """The controller actor called `name`, spawning `Class(*args, **kwargs)` the first time.

    A spawn that fails (a class that is not an Actor, arguments `__init__` does not take, a name
    that is not a string) fails the future with an `ActorError` whose `exception` is the spawn's
    error, as torchmonarch's controller-controller call does.
    """
    rt = get_runtime()
    payload = encode((Class, args, kwargs))
    entry = OncePort()
    root = root_address(rt)
    port = rt.mailbox.open_port(entry, (root,))
    rt.mailbox.post(root, control(GetOrSpawnController(name, payload), port))
    return Future.from_concurrent(entry.cf, decode_reply)


def root_address(rt: Runtime) -> str:
    return getattr(rt, "root_address", None) or rt.address


def _serve(rt: Runtime) -> None:
    def handler(peer: str, op: GetOrSpawnController, reply: Any) -> None:
        name, payload = op.name, op.payload
        try:
            with _lock:
                mesh = _controllers.get(name)
                if mesh is None:
                    cls, a, kw = decode(payload)
                    mesh = _controllers[name] = this_proc().spawn(name, cls, *a, **kw)
        except Exception as exc:
            rt.mailbox.reply_error(reply, ActorError(exc, _SPAWN_FAILED))
            return
        rt.mailbox.reply(reply, mesh)

    rt.mailbox.control.register(GetOrSpawnController, handler)


_runtime_module.on_start.add(_serve)
