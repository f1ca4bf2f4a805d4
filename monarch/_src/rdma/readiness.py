"""Starting the RDMA managers of a proc mesh (torchmonarch's "RDMA manager initialization").

On Monarch every proc of a mesh runs an RDMA manager, and creating a buffer, submitting an
action or dropping a buffer first waits until the managers of the caller's proc mesh are up;
a manager that cannot start fails those calls with `RdmaInitError`. Here a proc's manager is
the object `manager.get_manager()` makes on first use. `init_here()` checks this process's RDMA
settings (`check_settings`: a well-formed `rdma_ibverbs_target`, and some backend: ibverbs, or
the TCP fallback when it is allowed) and starts its manager; `init_mesh(proc_mesh)` does that on
every proc of a mesh at once: directly for this process, through the control op `rdma_init`
for the others (each proc answers with its own settings, which its spawner gave it).
`install()` registers `rdma_init` in every runtime of the process; the wiring calls it in every
proc and controller.

Procs that answered are remembered, so initializing another mesh over the same procs (or the
same mesh from another actor of this process) sends nothing. A failure is not remembered: the
next call asks again.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING, Any

from monarch._src.config import get as config_get
from monarch._src.lowlevel import Runtime, get_runtime, install_on_start, proc_table
from monarch._src.rdma.control import LazyPool, ask_all
from monarch._src.rdma.control_ops import RdmaInit
from monarch._src.rdma.errors import RdmaInitError

if TYPE_CHECKING:
    from monarch._src.rdma.manager import Manager

__all__ = ["INIT_TIMEOUT_S", "check_settings", "init_here", "init_mesh", "install"]

INIT_TIMEOUT_S = 60.0  # how long the procs of a mesh may take to come up and answer

# Separate pools: a process waiting for its peers' answers must still answer theirs.
_wait_pool = LazyPool("monarch-rdma-init")
_serve_pool = LazyPool("monarch-rdma-init-serve")
_started_lock = threading.Lock()
_started: set[str] = set()  # addresses of procs whose manager answered `rdma_init`


def check_settings() -> None:
    """Raise `RdmaInitError` unless this process's settings let an RDMA manager start."""
    from monarch._src.rdma.ibverbs import device_target, probe

    device_target(str(config_get("rdma_ibverbs_target")))  # raises for a malformed target
    verbs = probe()
    if not verbs.available and not config_get("rdma_allow_tcp_fallback"):
        raise RdmaInitError(
            f"no RDMA backend available: ibverbs cannot be used ({verbs.reason.rstrip('.')}) and "
            "the TCP fallback is off. Call monarch.configure(rdma_allow_tcp_fallback=True) "
            "before spawning the procs to move buffers over TCP."
        )


def init_here() -> Manager:
    """Check the settings and start this process's manager (if it is not running yet)."""
    from monarch._src.rdma.manager import get_manager

    check_settings()
    return get_manager()


def init_mesh(proc_mesh: Any, timeout: float = INIT_TIMEOUT_S) -> concurrent.futures.Future[None]:
    """Start the managers of every proc of `proc_mesh` (a view starts its own procs only);
    resolves once all answered, or fails with the first `RdmaInitError`, `SupervisionError`
    (a proc died) or `TimeoutError` (after `timeout` s)."""
    return _wait_pool().submit(_init_mesh, proc_mesh, timeout)


def _init_mesh(proc_mesh: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    table = proc_table(proc_mesh)
    ranks = [state.proc_rank for state in proc_mesh.rank_states()]
    try:
        table.ready.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(
            f"The procs of the mesh did not come up within {timeout:g} s, so their RDMA managers "
            "could not start."
        ) from None
    here = get_runtime().address
    addrs = sorted({table.keys[rank] for rank in ranks})
    if here in addrs:
        init_here()
    with _started_lock:
        others = [a for a in addrs if a != here and a not in _started]
    if not others:
        return
    ask_all(others, RdmaInit(), max(deadline - time.monotonic(), 0.0))
    with _started_lock:
        _started.update(others)


def _install_agent(rt: Runtime) -> None:
    mailbox = rt.mailbox

    def rdma_init(peer: str, op: RdmaInit, reply: Any) -> None:
        # Starting a manager binds a socket: off the runtime loop.
        def run() -> None:
            try:
                init_here()
            except Exception as exc:  # noqa: BLE001 - any failure is the requester's answer
                if reply is not None:
                    mailbox.reply_error(reply, exc)
            else:
                if reply is not None:
                    mailbox.reply(reply, None)

        _serve_pool().submit(run)

    mailbox.control.register(RdmaInit, rdma_init)


def install() -> None:
    """Answer `rdma_init` in this process (idempotent): in the runtime already running, if
    any, and in every runtime started later."""
    install_on_start(_install_agent)
