"""Two waits that used to hang on a dead proc (issue 14).

1. A proc that ends before it reports ready (a `bootstrap` that calls `os._exit` or is killed, an
   interpreter from `HostMesh.with_python_executable` that cannot run monarch) fails its rank at
   once, with its exit status, as a proc that dies after ready does: `initialized`, actors
   spawned on it, calls and `stop()` resolve at once, and the proc mesh's owner (here the
   client's fault hook) is told; on a remote host (`attach_to_workers`) too. Before, they
   waited for `mesh_proc_spawn_max_idle` (30 s). With a bootstrap, the failure reads as
   torchmonarch's setup actor ("Endpoint call setup.setup() failed, ..."), and a bootstrap that
   raises gives its `ActorError` ("Actor call setup.setup failed.").
2. A reply port handed to an actor in a call's arguments is answered with a `SupervisionError`
   when that actor's proc dies before answering it, so the caller waiting on it does not hang;
   a multi-use `Channel` port gets the failure as one message when the proc failed (not when
   it was stopped).

Each test spawns its own procs (they die on purpose). Every wait is bounded well below 30 s, so
a regression fails fast instead of passing after the idle timeout.
"""

from __future__ import annotations

import os
import re
import signal
import stat
from typing import Any

import pytest

from monarch._src.runtime.runtime import get_runtime
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, ActorError, Channel, attach_to_workers, endpoint, this_host
from tests.hosts.conftest import two_workers  # noqa: F401 (a fixture)

# Below mesh_proc_spawn_max_idle (30 s): an answer that only the idle timeout gives fails here.
FAST = 15.0


def exit_3() -> None:
    os._exit(3)


def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Echo(Actor):
    @endpoint
    def ping(self) -> int:
        return os.getpid()


class Dies(Actor):
    """Ends its own process while it holds a reply port it was handed."""

    @endpoint
    def die(self, port: Any) -> None:
        os._exit(7)

    @endpoint
    def answer(self, port: Any) -> None:
        port.send("answered")

    @endpoint
    def address(self) -> str:
        return get_runtime().address


class Relay(Actor):
    @endpoint(explicit_response_port=True)
    def relay(self, port: Any, other: Any) -> None:
        other.die.broadcast(port)  # the other actor owes the answer now

    @endpoint(explicit_response_port=True)
    def relay_answered(self, port: Any, other: Any) -> None:
        other.answer.broadcast(port)

    @endpoint(explicit_response_port=True)
    def relay_to_own_child(self, port: Any) -> None:
        # This actor owns the proc that dies; the caller neither owns it nor talks to it.
        self.children = this_host().spawn_procs(per_host={"gpus": 1})
        self.children.spawn("child", Dies).die.broadcast(port)

    @endpoint
    def spawn_child(self) -> str:
        self.children = this_host().spawn_procs(per_host={"gpus": 1})
        self.child = self.children.spawn("child", Dies)
        return self.child.address.call_one().get()

    @endpoint(explicit_response_port=True)
    def hand_to_child(self, port: Any) -> None:
        self.child.die.broadcast(port)


@pytest.mark.parametrize(
    ("bootstrap", "status"),
    [
        pytest.param(exit_3, "exited with non-zero code 3", id="os_exit"),
        pytest.param(killed, r"failed: Killed\(sig=9\)", id="sigkill"),
    ],
)
def test_proc_that_dies_before_ready_fails_at_once(
    fault_recorder: Any, bootstrap: Any, status: str
) -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=bootstrap)
    early = procs.spawn("early", Echo)  # held until the procs are up: they never are
    in_flight = early.ping.call()  # sent before the death is known, or refused after it
    with pytest.raises(SupervisionError, match=status):
        procs.initialized.get(timeout=FAST)
    with pytest.raises(SupervisionError, match=status):
        in_flight.get(timeout=FAST)
    with pytest.raises(SupervisionError, match=status):
        early.ping.call().get(timeout=FAST)
    late = procs.spawn("late", Echo)
    with pytest.raises(SupervisionError) as failed:
        late.ping.call().get(timeout=FAST)
    # Monarch runs the bootstrap in a setup actor whose failure every call gets.
    text = str(failed.value)
    assert re.fullmatch(
        r"Endpoint call setup\.setup\(\) failed, The actor <root>\.<monarch\._src\.actor\."
        r"proc_mesh\.SetupActor setup\{'gpus': [01]/2\}> and all its descendants have failed:\n"
        rf"  the process this actor was running on {status}",
        text,
    ), text
    texts = fault_recorder.wait_for(1, timeout=FAST)
    expected = f"the process this actor was running on {status}"
    assert any(re.search(expected, t) for t in texts), texts
    procs.stop().get(timeout=FAST)


def raises() -> None:
    raise ValueError("bootstrap refused")


def test_bootstrap_that_raises_fails_as_the_setup_call(fault_recorder: Any) -> None:
    """As in Monarch: the bootstrap's exception reaches `initialized` and every call as the
    `ActorError` of the setup actor's call, not as a proc failure (no fault is reported)."""
    procs = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=raises)
    with pytest.raises(ActorError) as failed:
        procs.initialized.get(timeout=FAST)
    assert str(failed.value).startswith("Actor call setup.setup failed.\n Traceback of where")
    assert str(failed.value).endswith("ValueError: bootstrap refused\n")
    assert isinstance(failed.value.exception, ValueError)
    with pytest.raises(ActorError, match="Actor call setup.setup failed."):
        procs.spawn("late", Echo).ping.call().get(timeout=FAST)
    procs.stop().get(timeout=FAST)
    assert fault_recorder.texts == []


def test_interpreter_that_cannot_start_fails_at_once(fault_recorder: Any, tmp_path: Any) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 5\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    procs = this_host().with_python_executable(str(fake)).spawn_procs(per_host={"gpus": 1})
    with pytest.raises(SupervisionError, match="exited with non-zero code 5"):
        procs.initialized.get(timeout=FAST)
    with pytest.raises(SupervisionError, match="exited with non-zero code 5"):
        procs.spawn("echo", Echo).ping.call_one().get(timeout=FAST)
    fault_recorder.wait_for(1, timeout=FAST)
    procs.stop().get(timeout=FAST)


def test_port_handed_on_to_an_actor_whose_proc_dies(fault_recorder: Any) -> None:
    relays = this_host().spawn_procs(per_host={"gpus": 2})
    victims = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        relay = relays.spawn("relay", Relay)
        dies = victims.spawn("dies", Dies)
        # An answer that does come is not replaced by a failure.
        answers = relay.relay_answered.call(dies).get(timeout=FAST)
        assert [answers.item(gpus=0), answers.item(gpus=1)] == ["answered", "answered"]
        # Both ranks hand their port to the actor that dies: the call resolves, with the exit
        # status (the client, which owns that proc, answers the ports it was told were handed).
        with pytest.raises(SupervisionError, match="exited with non-zero code 7"):
            relay.relay.call(dies).get(timeout=FAST)
        fault_recorder.wait_for(1, timeout=FAST)
    finally:
        victims.stop().get(timeout=FAST)
        relays.stop().get(timeout=FAST)


def test_port_handed_to_a_proc_the_caller_does_not_know(fault_recorder: Any) -> None:
    relays = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        relay = relays.spawn("relay", Relay)
        with pytest.raises(SupervisionError, match="exited with non-zero code 7"):
            relay.relay_to_own_child.call_one().get(timeout=FAST)
    finally:
        relays.stop().get(timeout=FAST)


def test_dead_proc_at_a_reused_address_is_not_taken_for_a_new_one(fault_recorder: Any) -> None:
    """The caller once knew a proc, now dead, at the address where the relay's child listens
    (the OS reuses ports): its reply port, handed to that child, gets the child's own end, not
    the old proc's."""
    relays = this_host().spawn_procs(per_host={"gpus": 1})
    mailbox = get_runtime().mailbox
    child = ""
    try:
        relay = relays.spawn("relay", Relay)
        child = relay.spawn_child.call_one().get(timeout=FAST)
        get_runtime().call_soon(
            mailbox._dead.__setitem__, child, SupervisionError("an older proc there stopped"))
        with pytest.raises(SupervisionError, match="exited with non-zero code 7"):
            relay.hand_to_child.call_one().get(timeout=FAST)
    finally:
        get_runtime().call_soon(mailbox._dead.pop, child, None)
        relays.stop().get(timeout=FAST)


def test_clients_once_port_handed_to_an_actor_whose_proc_dies(fault_recorder: Any) -> None:
    victims = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        dies = victims.spawn("dies", Dies)
        port, receiver = Channel.open(once=True)
        dies.die.broadcast(port)
        # The client owns that proc: the error carries its exit status.
        with pytest.raises(SupervisionError, match="exited with non-zero code 7"):
            receiver.recv().get(timeout=FAST)
        fault_recorder.wait_for(1, timeout=FAST)
    finally:
        victims.stop().get(timeout=FAST)


def test_channel_port_handed_to_an_actor_whose_proc_fails(fault_recorder: Any) -> None:
    """A multi-use port gets the failure as one message, as from a failed actor that held it;
    a port handed to procs that are stopped gets nothing."""
    victims = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        port, receiver = Channel.open()
        victims.spawn("dies", Dies).die.broadcast(port)
        with pytest.raises(SupervisionError, match="exited with non-zero code 7"):
            receiver.recv().get(timeout=FAST)
        fault_recorder.wait_for(1, timeout=FAST)
        port.send("still open")
        assert receiver.recv().get(timeout=FAST) == "still open"
    finally:
        victims.stop().get(timeout=FAST)

    stopped = this_host().spawn_procs(per_host={"gpus": 1})
    port, receiver = Channel.open()
    stopped.spawn("answers", Dies).answer.broadcast(port)
    assert receiver.recv().get(timeout=FAST) == "answered"
    stopped.stop().get(timeout=FAST)
    port.send("after the stop")
    assert receiver.recv().get(timeout=FAST) == "after the stop"  # no failure came before it


def test_handed_ports_are_remembered_boundedly() -> None:
    from monarch._src.runtime import mailbox as mailbox_module

    mailbox = get_runtime().mailbox
    peer = "tcp://127.0.0.1:9"  # never contacted: nothing is sent to it
    limit = mailbox_module._HANDED_MAX
    ports = [((mailbox.address, 10**9 + i), None, True) for i in range(limit + 10)]
    mailbox.ports_handed(ports, (peer,), mailbox.address)
    get_runtime().submit(_noop()).result(timeout=FAST)  # after the post queue was drained
    try:
        assert len(mailbox._handed[peer]) == limit
        assert next(iter(mailbox._handed[peer])) == ports[10][:2]  # the oldest were forgotten
    finally:
        get_runtime().call_soon(mailbox._handed.pop, peer, None)


async def _noop() -> None:
    return None


def test_remote_proc_that_dies_before_ready_fails_at_once(
    two_workers: Any,  # noqa: F811 - the fixture imported above, as pytest passes it
    fault_recorder: Any,
) -> None:
    hosts = attach_to_workers(ca="trust_all_connections", workers=two_workers.addresses)
    try:
        procs = hosts.spawn_procs(per_host={"gpus": 1}, bootstrap=exit_3)
        with pytest.raises(SupervisionError, match="exited with non-zero code 3"):
            procs.initialized.get(timeout=FAST)
        with pytest.raises(SupervisionError, match="exited with non-zero code 3"):
            procs.spawn("echo", Echo).ping.call().get(timeout=FAST)
        # (Before the stop: a stopped mesh's failures are no one's to hear.)
        fault_recorder.wait_for(1, timeout=FAST)
        procs.stop().get(timeout=FAST)
    finally:
        hosts.shutdown().get(timeout=30)
