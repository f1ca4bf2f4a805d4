"""`attach(addr)`: bootstrap the client by connecting it to a host's server first.

Monarch's `attach(addr)` joins the client's gateway to the duplex server of a worker host, so
that the client's traffic goes over that one connection and the worker routes the answers
back. Here `attach(addr)` starts the client's runtime and opens its connection to the worker
at `addr` (a `run_worker_loop_forever` / `monarch worker` address: `ipc:///path` or
`tcp://host:port`), waiting until the worker answers on it. The connection stays open for
the client's life: attaching that worker's hosts later (`attach_to_workers`, a `ProcessJob`'s
`state()`) goes over it, without dialing the worker's listening address again (which may be
gone by then, as Monarch's tests check by removing its socket file).

What is not here: return traffic over the same connection. Our transport opens one outgoing
connection per peer and sends only on its own connections, so the procs of the attached host
still reach the client by dialing its address; the client must be reachable from them (run it
where the hosts can dial it, or use `enable_transport("tcp://<routable address>:0")`).
Rejected alternative: relaying the client's answers through the worker's server, which would
still need the worker to dial the client.

As on Monarch, `attach` must come before the client starts (the first `context()`,
`this_host()`, `this_proc()`, or any mesh), since the addresses of the client's actors and
ports are fixed when they are made; attaching again through the same address does nothing,
through another raises.
"""

from __future__ import annotations

import asyncio
import threading

from monarch._src.config import duration_seconds
from monarch._src.hosts.addresses import dial_address, parse_worker_address
from monarch._src.hosts.control_ops import GatewayAttach
from monarch._src.runtime.control import control
from monarch._src.runtime.ports import OncePort, decode_reply
from monarch._src.runtime.runtime import Runtime, get_runtime, runtime_if_started

__all__ = ["attach", "attached_dial_address", "attached_to"]

_lock = threading.Lock()
_attached: str | None = None  # the address given to attach(), once the worker answered
_dialed: str | None = None  # that worker's transport address (unix:///path, tcp://h:p)


def attach(addr: str) -> None:
    """Bootstrap this process's client through the worker host at `addr` (before any other
    monarch call); see the module docstring for what it does and does not do."""
    global _attached, _dialed
    scheme, host, port = parse_worker_address(addr, what="attach")
    dial = dial_address(scheme, host, port)
    with _lock:
        if runtime_if_started() is not None:
            if _attached == addr:
                return
            if _attached is not None:
                raise RuntimeError(
                    f"client is already attached through {_attached}, not {addr}; detaching is "
                    "not supported, so use a new process to attach through a different address"
                )
            raise RuntimeError(
                "client was initialized without a remote attachment; call attach(addr) before "
                "the first context()/this_host()/this_proc()"
            )
        rt = get_runtime()
        timeout = duration_seconds("mesh_attach_config_timeout")
        try:
            rt.submit(_hello(rt, dial, timeout)).result(timeout + 5)
        except Exception as exc:
            raise RuntimeError(f"attach({addr!r}): no monarch host answered there: {exc}. "
                               "Start the worker first (run_worker_loop_forever).") from exc
        _attached, _dialed = addr, dial


async def _hello(rt: Runtime, dial: str, timeout: float) -> None:
    """Open the connection to the worker and wait for its answer on it (loop)."""
    from monarch._src.hosts.remote_agent import probe_address  # (it imports this module)

    # A worker may still be starting (a job's allocation that just began to run).
    await probe_address(dial, within=duration_seconds("host_spawn_ready_timeout"))
    entry = OncePort()
    port = rt.mailbox.open_port(entry, (dial,))
    rt.mailbox.post(dial, control(GatewayAttach(rt.address), port))
    try:
        decode_reply(await asyncio.wait_for(asyncio.wrap_future(entry.cf), timeout))
    except asyncio.TimeoutError:
        rt.mailbox.close_port(port)
        raise RuntimeError(f"no answer within {timeout:g}s") from None


def attached_to() -> str | None:
    """The address this client attached through (`attach`), or None."""
    return _attached


def attached_dial_address() -> str | None:
    """The transport address of the worker this client attached through, or None: its
    connection is open, so attaching that worker's hosts need not probe its address."""
    return _dialed
