"""A failed actor's `__cleanup__` runs once, with an `Exception` saying why (as in torchmonarch).

The exception reads "serving <actor id>: <reason>", the reason being the failure's (for an
endpoint that raised: "actor explicitly aborted due to: " and the traceback). A later `stop()`
does not run it again; an actor whose `__init__` failed never runs it. After the cleanup, the
ports the failed actor held (here the one its `__init__` got) are told of the failure.
"""

from __future__ import annotations

from typing import Any

import pytest

from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, Channel, endpoint

TIMEOUT = 30.0


class Fatal(BaseException):
    """Not an `Exception`: always fails the actor."""


class Reporter(Actor):
    def __init__(self, port: Any, fail_init: bool = False) -> None:
        self.port = port
        if fail_init:
            raise ValueError("init failed")

    @endpoint
    def ping(self) -> str:
        return "pong"

    @endpoint
    def die(self) -> None:
        raise Fatal("died on purpose")

    def __cleanup__(self, exc: Any) -> None:
        self.port.send(f"{type(exc).__name__}: {exc}")


class AsyncReporter(Actor):
    def __init__(self, port: Any) -> None:
        self.port = port

    @endpoint
    async def ping(self) -> str:
        return "pong"

    @endpoint
    async def die(self) -> None:
        raise Fatal("died on purpose (async)")

    async def __cleanup__(self, exc: Any) -> None:
        self.port.send(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("cls", [Reporter, AsyncReporter])
def test_failed_actor_runs_cleanup_once_with_the_reason(
    procs2: Any, fault_recorder: Any, cls: type[Actor]
) -> None:
    port, receiver = Channel.open()
    mesh = procs2.spawn(f"cleanup_{cls.__name__.lower()}", cls, port)
    one = mesh.slice(gpus=0)
    assert one.ping.call_one().get(timeout=TIMEOUT) == "pong"
    one.die.broadcast()
    text = receiver.recv().get(timeout=TIMEOUT)
    assert text.startswith("Exception: serving cleanup_"), text
    assert ": actor explicitly aborted due to: Traceback (most recent call last):" in text
    assert text.rstrip("\n").endswith("Fatal: died on purpose" + (
        " (async)" if cls is AsyncReporter else ""))
    fault_recorder.wait_for(1)
    with pytest.raises(SupervisionError, match="died on purpose"):
        receiver.recv().get(timeout=TIMEOUT)  # the failed actor held this port
    assert mesh.stop().get(timeout=TIMEOUT) == ()
    # Only the healthy rank's cleanup runs on stop; the failed one's already ran.
    assert receiver.recv().get(timeout=TIMEOUT) == "NoneType: None"
    with pytest.raises(TimeoutError):
        receiver.recv().get(timeout=1.0)  # nothing more may come: this wait must time out


def test_actor_whose_init_failed_runs_no_cleanup(procs2: Any, fault_recorder: Any) -> None:
    port, receiver = Channel.open()
    mesh = procs2.spawn("cleanup_bad_init", Reporter, port, True)
    fault_recorder.wait_for(2)
    for _ in range(2):  # each failed rank held the port its __init__ got: no cleanup message
        with pytest.raises(SupervisionError, match="init failed"):
            receiver.recv().get(timeout=TIMEOUT)
    assert mesh.stop().get(timeout=TIMEOUT) == ()
    with pytest.raises(TimeoutError):
        receiver.recv().get(timeout=1.0)
