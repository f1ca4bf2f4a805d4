"""Real multi-host: network namespaces joined by veth pairs and a bridge as two machines.

Two namespaces get their own addresses (10.a.b.2 and 10.a.b.3) behind a bridge in the root
namespace (10.a.b.1), where the controller runs (a subprocess, so it can listen on the bridge's
address from its start). A Dask scheduler runs in the first namespace and a `monarch worker
--dask-scheduler` in each; the controller spawns procs across both, procs on different hosts
call each other, and taking the second host's link down fails its ranks within the configured
heartbeat timeout. Needs root and iproute2; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.hosts.conftest import REPO, wait_listening, worker_env
from tests.hosts.netns import Namespaces, cannot_make_namespaces, ip


@pytest.fixture
def hosts_in_namespaces() -> Iterator[tuple[Namespaces, str]]:
    why = cannot_make_namespaces()
    if why is not None:
        pytest.skip(why)
    try:
        spaces = Namespaces(2)
    except (subprocess.CalledProcessError, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        pytest.skip(f"could not create network namespaces/veth pairs here: "
                    f"{err.decode(errors='replace').strip() or exc}")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        scheduler = f"tcp://{spaces.ips[0]}:8786"
        procs.append(spaces.popen(0, [sys.executable, "-m", "distributed.cli.dask_scheduler",
                                      "--host", spaces.ips[0], "--port", "8786",
                                      "--no-dashboard"], worker_env(), REPO))
        wait_listening(procs[0], spaces.ips[0], 8786)  # also proves the bridge routes
        for i in range(2):
            procs.append(spaces.popen(i, [
                sys.executable, "-m", "monarch._src.hosts.worker_cli",
                "--dask-scheduler", scheduler, "--host", spaces.ips[i]], worker_env(), REPO))
        yield spaces, scheduler
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait(timeout=10)
        spaces.close()


_CONTROLLER = r"""
import json, os, queue, sys, time
from monarch.actor import enable_transport
enable_transport(f"tcp://{sys.argv[1]}:0")
from monarch.config import configure
configure(host_heartbeat_interval="100ms", host_heartbeat_timeout="1500ms")
import monarch.actor as ma
from monarch.actor import Actor, endpoint, hosts_from_dask
from distributed import Client

events = queue.Queue()
ma.unhandled_fault_hook = lambda failure: events.put(str(failure))

class Node(Actor):
    @endpoint
    def where(self):
        from monarch._src.runtime.runtime import get_runtime
        return os.getpid(), get_runtime().address

    @endpoint
    def ask(self, peers):
        return peers.slice(hosts=1, gpus=1).where.call_one().get(timeout=20)

def say(**kw):
    print(json.dumps(kw), flush=True)

with Client(sys.argv[2], set_as_default=False, timeout=30) as client:
    client.wait_for_workers(2, timeout=45)
    hosts = hosts_from_dask(client)
    procs = hosts.spawn_procs(per_host={"gpus": 2}, name="netprocs")
    nodes = procs.spawn("node", Node)
    got = [v for _, v in nodes.where.call().get(timeout=30).items()]
    relayed = nodes.slice(hosts=0, gpus=0).ask.call_one(nodes).get(timeout=30)
    say(step="ready", hosts=hosts.extent.sizes, addrs=[a for _, a in got],
        pids=[p for p, _ in got], relayed=list(relayed))
    sys.stdin.readline()  # the test took host 1's link down
    started = time.monotonic()
    texts = [events.get(timeout=20), events.get(timeout=20)]
    took = time.monotonic() - started
    try:
        nodes.slice(hosts=1).where.call().get(timeout=10)
        host1 = "answered"
    except Exception as exc:
        host1 = type(exc).__name__
    host0 = len(nodes.slice(hosts=0).where.call().get(timeout=10))
    say(step="lost", texts=texts, took=took, host1=host1, host0=host0)
    hosts.shutdown().get(timeout=30)
say(step="done")
os._exit(0)
"""


@pytest.mark.timeout(120)
def test_hosts_in_network_namespaces(hosts_in_namespaces: tuple[Namespaces, str]) -> None:
    spaces, scheduler = hosts_in_namespaces
    controller = subprocess.Popen(
        [sys.executable, "-c", _CONTROLLER, spaces.gateway, scheduler], env=worker_env(),
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert controller.stdout is not None and controller.stdin is not None
        line = controller.stdout.readline()
        assert line, controller.stderr.read().decode()[-3000:] if controller.stderr else ""
        ready = json.loads(line)
        assert ready["hosts"] == [2]
        ips = [a.partition("://")[2].rpartition(":")[0] for a in ready["addrs"]]
        assert ips == [spaces.ips[0], spaces.ips[0], spaces.ips[1], spaces.ips[1]]
        assert ready["relayed"] == [ready["pids"][3], ready["addrs"][3]]
        ip("link", "set", spaces.links[1], "down")
        controller.stdin.write(b"down\n")
        controller.stdin.flush()
        line = controller.stdout.readline()
        assert line, controller.stderr.read().decode()[-3000:] if controller.stderr else ""
        lost = json.loads(line)
        joined = "\n".join(lost["texts"])
        assert "crashed_ranks=[2]" in joined and "crashed_ranks=[3]" in joined
        assert "was lost" in joined, joined
        print(f"host loss seen after {lost['took']:.2f}s")
        assert lost["took"] < 1.5 + 3.0  # heartbeat timeout plus scheduling slack
        assert lost["host1"] == "SupervisionError"
        assert lost["host0"] == 2
        assert json.loads(controller.stdout.readline())["step"] == "done"
        assert controller.wait(timeout=30) == 0
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait(timeout=10)
        for pipe in (controller.stdin, controller.stdout, controller.stderr):
            if pipe is not None:
                pipe.close()
