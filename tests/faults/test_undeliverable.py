"""A message with no reply port that cannot be delivered bounces back to its sender."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from monarch.actor import Actor, Channel, Port, endpoint, this_host

pytestmark = pytest.mark.timeout(90)


class Target(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def poke(self) -> None:
        pass


class Sender(Actor):
    """Holds a reference to the target mesh and reports bounced messages through a port."""

    def __init__(self, swallow: bool) -> None:
        self.swallow = swallow
        self.report: Port[str] | None = None

    @endpoint
    def watch(self, report: Port[str]) -> None:
        self.report = report

    @endpoint
    def poke(self, target: Any) -> None:
        target.poke.broadcast()

    @endpoint
    def alive(self) -> bool:
        return True

    def _handle_undeliverable_message(self, message: Any) -> bool:
        assert self.report is not None
        self.report.send(str(message))
        return self.swallow


def _setup(swallow: bool) -> tuple[Any, Any, Any, Any, Any]:
    target_procs = this_host().spawn_procs(per_host={"gpus": 1})
    sender_procs = this_host().spawn_procs(per_host={"gpus": 1})
    target = target_procs.spawn("bounce_target", Target)
    sender = sender_procs.spawn("bounce_sender", Sender, swallow)
    port, receiver = Channel[str].open()
    sender.watch.call_one(port).get(timeout=30)
    pid = target.pid.call_one().get(timeout=30)
    sender.poke.call_one(target).get(timeout=30)  # the sender is connected to the target
    os.kill(pid, signal.SIGKILL)
    return target_procs, sender_procs, target, sender, receiver


def test_undeliverable_broadcast_reaches_sender_handler_which_swallows_it(
    fault_recorder: Any,
) -> None:
    target_procs, sender_procs, target, sender, receiver = _setup(swallow=True)
    try:
        # Poke until the sender's process has noticed the target is gone and bounces.
        bounced = receiver.recv()
        while not bounced.done():
            sender.poke.call_one(target).get(timeout=30)
            try:
                bounced.get(timeout=0.2)
            except TimeoutError:
                continue
        text = bounced.get(timeout=0)
        assert "bounce_target" in text and "poke" in text and "could not be delivered" in text
        assert sender.alive.call_one().get(timeout=30) is True  # swallowed: the sender lives
    finally:
        target_procs.stop().get(timeout=60)
        sender_procs.stop().get(timeout=60)


def test_undeliverable_broadcast_not_handled_fails_the_sender(fault_recorder: Any) -> None:
    target_procs, sender_procs, target, sender, receiver = _setup(swallow=False)
    try:
        bounced = receiver.recv()
        while not bounced.done():
            try:
                sender.poke.call_one(target).get(timeout=30)
            except Exception:
                break  # the sender already failed
            try:
                bounced.get(timeout=0.2)
            except TimeoutError:
                continue
        # Two faults reach the client: the target's proc died, and the sender, which did not
        # handle its bounced message, failed.
        texts = fault_recorder.wait_for(2, timeout=30)
        assert any("bounce_target" in t and "Killed(sig=9)" in t for t in texts), texts
        assert any("bounce_sender" in t and "undeliverable" in t for t in texts), texts
    finally:
        target_procs.stop().get(timeout=60)
        sender_procs.stop().get(timeout=60)
