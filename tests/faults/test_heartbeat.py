"""A hung proc (here: stopped with SIGSTOP) misses its heartbeats and fails like a dead one."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

import monarch.config
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, endpoint, this_host

pytestmark = pytest.mark.timeout(60)


class Pid(Actor):
    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def wait(self) -> int:
        threading.Event().wait(30)
        return 0


def test_stopped_proc_misses_heartbeats_and_fails_calls(fault_recorder: Any) -> None:
    with monarch.config.configured(heartbeat_interval="100ms", heartbeat_timeout="1s"):
        procs = this_host().spawn_procs(per_host={"gpus": 2})
        victim = None
        try:
            actors = procs.spawn("hb", Pid)
            victim = actors.pid.call().get(timeout=30).item(gpus=1)
            in_flight = actors.slice(gpus=1).wait.call_one()
            os.kill(victim, signal.SIGSTOP)
            started = time.monotonic()
            with pytest.raises(SupervisionError) as info:
                in_flight.get(timeout=20)
            detected = time.monotonic() - started
            assert "unresponsive" in str(info.value)
            assert str(info.value).startswith("Endpoint call hb.wait() failed,")
            assert detected < 1.0 + 2.0  # timeout plus two intervals and slack
            with pytest.raises(SupervisionError):
                actors.slice(gpus=1).pid.call_one().get(timeout=5)
            assert actors.slice(gpus=0).pid.call_one().get(timeout=30) != victim
            texts = fault_recorder.wait_for(1, timeout=20)
            assert any(
                "unresponsive" in t and "mesh_name=hb" in t and "crashed_ranks=[1]" in t
                for t in texts
            ), texts
        finally:
            if victim is not None:
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            procs.stop().get(timeout=60)
