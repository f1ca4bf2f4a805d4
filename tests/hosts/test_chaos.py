"""A small chaos soak (benchmarks/chaos_soak.py) across two network-namespace hosts.

1,000 calls in 8 waves while one proc is SIGKILLed, one host's `monarch worker` is SIGKILLed and
one host's link is cut (each repaired before the next wave). It runs in a subprocess, as a crash
test must. Asserted: every future resolved, with its value or a SupervisionError; no reply of an
unaffected rank lost; no wrong value; no process left in either namespace after shutdown; every
affected future resolved within RESOLUTION_BOUND_S of its fault. The soak's own target is 2 s
(heartbeat timeout 1 s at 100 ms beats); the bound here is twice that because this test shares
2 cores with other suites, and is still well under the 10 s default heartbeat timeout, so a cut
detected only by the defaults fails it. Needs root and iproute2; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.hosts.conftest import REPO, worker_env
from tests.hosts.netns import Namespaces, cannot_make_namespaces

pytestmark = pytest.mark.timeout(150)

RESOLUTION_BOUND_S = 4.0


@pytest.fixture
def namespaces_possible() -> None:
    why = cannot_make_namespaces()
    if why is not None:
        pytest.skip(why)
    try:
        Namespaces(1).close()
    except (subprocess.CalledProcessError, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        pytest.skip(f"could not create network namespaces/veth pairs here: "
                    f"{err.decode(errors='replace').strip() or exc}")


def test_chaos_soak_small(namespaces_possible: None) -> None:
    run = subprocess.run(
        [sys.executable, "benchmarks/chaos_soak.py", "--calls", "1000", "--wave", "125",
         "--faults-per-kind", "1", "--seed", "19", "--bound-s", str(RESOLUTION_BOUND_S)],
        cwd=REPO, env=worker_env(), capture_output=True, timeout=130,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    report = json.loads(run.stdout)
    detail = json.dumps(report, indent=1)
    assert [f["kind"] for f in report["faults"]] and all(
        "error" not in f for f in report["faults"]), detail
    assert sorted(f["kind"] for f in report["faults"]) == ["host_kill", "net_cut", "proc_kill"]
    assert report["unresolved"] == 0, detail
    assert report["replies_lost"] == 0, detail
    assert report["wrong_values"] == 0, detail
    assert report["affected_outcomes"]["other"] == 0, detail
    assert report["affected_outcomes"]["SupervisionError"] > 0, detail
    assert report["values"] + report["affected_outcomes"]["SupervisionError"] == 1000, detail
    assert report["leaked_pids"] == {}, detail
    assert report["procs_alive_after_shutdown"] == [], detail
    assert report["shutdown_errors"] == [], detail
    for kind, fig in report["resolution_ms"].items():
        assert fig["n"] > 0, (kind, detail)
        assert fig["max"] <= RESOLUTION_BOUND_S * 1e3, (kind, detail)


_RECUT = r"""
import os, sys, threading
sys.path.insert(0, os.getcwd())
from tests.hosts.netns import Namespaces, ip, wait_listening
from benchmarks.chaos_soak import Echo
from monarch.actor import attach_to_workers, enable_transport
import monarch.actor

spaces = Namespaces(1)
worker = None
try:
    enable_transport(f"tcp://{spaces.gateway}:0")
    from monarch.config import configure
    beat = dict(host_heartbeat_interval="100ms", host_heartbeat_timeout="1s",
                heartbeat_interval="100ms", heartbeat_timeout="1s",
                mesh_attach_config_timeout="5s")
    configure(**beat)
    lost = threading.Event()
    monarch.actor.unhandled_fault_hook = lambda failure: lost.set()
    env = dict(os.environ, MONARCH_PRESTART="0",
               **{f"MONARCH_{k.upper()}": v for k, v in beat.items()})
    addr = f"tcp://{spaces.ips[0]}:26600"
    worker = spaces.popen(0, [sys.executable, "-m", "monarch._src.hosts.worker_cli",
                              "--address", addr], env, os.getcwd())
    wait_listening(worker, spaces.ips[0], 26600, 30)
    for round in range(2):
        hosts = attach_to_workers(ca="trust_all_connections", workers=[addr])
        hosts.initialized.get(timeout=30)
        echo = hosts.spawn_procs(per_host={"gpus": 1}).spawn("echo", Echo)
        print("answered", echo.echo.call_one(round).get(timeout=30), flush=True)
        if round == 0:
            ip("link", "set", spaces.links[0], "down")
            assert lost.wait(20), "the cut host was never reported lost"
            threading.Event().wait(2.0)  # the host drops its silent client meanwhile
            ip("link", "set", spaces.links[0], "up")
            wait_listening(worker, spaces.ips[0], 26600, 30)
finally:
    if worker is not None:
        worker.kill()
        worker.wait()
    spaces.close()
os._exit(0)
"""


def test_reattach_after_a_healed_cut(namespaces_possible: None) -> None:
    """A controller whose host was cut off (and lost) attaches to the same worker again once the
    link is back. Before the fix the worker, having seen the old connection break, kept the
    client's address marked dead and dropped its answer: the attach timed out ("no answer")."""
    run = subprocess.run([sys.executable, "-c", _RECUT], cwd=REPO, env=worker_env(),
                         capture_output=True, timeout=90)
    out = run.stdout.decode()
    assert run.returncode == 0, out + run.stderr.decode(errors="replace")[-3000:]
    assert out.split() == ["answered", "0", "answered", "1"], out
