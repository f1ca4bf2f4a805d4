"""attach_to_workers over `monarch worker` processes on loopback hosts (127.0.0.2, 127.0.0.3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from monarch._src.hosts.addresses import free_port
from monarch._src.procstat import process_alive
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import (
    Actor,
    ActorError,
    attach_to_workers,
    current_rank,
    endpoint,
    hosts_from_config,
)
from tests.hosts.conftest import (
    REPO,
    Workers,
    end_processes,
    wait_listening,
    worker_env,
)
from tests.pidwait import exits

TRUST = "trust_all_connections"


class Where(Actor):
    """Reports where it runs and relays calls to a peer mesh."""

    @endpoint
    def where(self) -> tuple[int, str, int]:
        from monarch._src.runtime.runtime import get_runtime

        return os.getpid(), get_runtime().address, current_rank().rank

    @endpoint
    def relay(self, peers: Any, rank: int) -> int:
        return peers.slice(**{"hosts": 1, "gpus": rank}).where.call_one().get(timeout=20)[0]

    @endpoint
    def crash(self) -> None:
        os._exit(7)


def _host(addr: str) -> str:
    return addr.partition("://")[2].rpartition(":")[0]


@pytest.mark.timeout(60)
def test_procs_run_on_their_hosts_and_talk_across_hosts(two_workers: Workers) -> None:
    hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses, name="pair")
    try:
        assert hosts.extent.labels == ["hosts"] and hosts.extent.sizes == [2]
        assert hosts.initialized.get(timeout=20) is True
        procs = hosts.spawn_procs(per_host={"gpus": 2})
        assert procs.extent.labels == ["hosts", "gpus"]
        actors = procs.spawn("where", Where)
        got = actors.where.call().get(timeout=30)
        places = {point["hosts"] * 2 + point["gpus"]: value for point, value in got.items()}
        assert [_host(places[r][1]) for r in range(4)] == [
            "127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]
        assert len({places[r][0] for r in range(4)}) == 4  # four processes
        worker_pids = {p.pid for p in two_workers.procs}
        assert not worker_pids & {places[r][0] for r in range(4)}
        # A proc on host 0 calls a proc on host 1 directly.
        first = actors.slice(hosts=0, gpus=0)
        assert first.relay.call_one(actors, 1).get(timeout=30) == places[3][0]
        procs.stop().get(timeout=30)
        with pytest.raises(SupervisionError, match="stopped"):
            actors.where.call().get(timeout=10)
        # The hosts stay usable after their procs stopped.
        again = hosts.spawn_procs(per_host={"gpus": 1}).spawn("again", Where)
        assert len(again.where.call().get(timeout=30)) == 2
    finally:
        hosts.shutdown().get(timeout=30)
    for proc in two_workers.procs:  # shutdown makes `monarch worker` processes exit
        assert proc.wait(timeout=20) == 0


@pytest.mark.timeout(60)
def test_proc_death_on_a_remote_host_is_a_supervision_event(
    two_workers: Workers, fault_recorder: Any
) -> None:
    hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses)
    try:
        procs = hosts.spawn_procs(per_host={"gpus": 1}, name="victims")
        actors = procs.spawn("crashy", Where)
        actors.where.call().get(timeout=30)
        actors.slice(hosts=1).crash.broadcast()
        texts = fault_recorder.wait_for(1, timeout=20)
        assert "crashy" in texts[0] and "crashed_ranks=[1]" in texts[0]
        assert "exited with non-zero code 7" in texts[0], texts[0]
        with pytest.raises(SupervisionError):
            actors.slice(hosts=1).where.call_one().get(timeout=10)
        # The other host's proc is untouched.
        assert actors.slice(hosts=0).where.call_one().get(timeout=10)[2] == 0
    finally:
        hosts.shutdown().get(timeout=30)


@pytest.mark.timeout(60)
def test_killed_host_fails_every_rank_on_it(
    two_workers: Workers, fault_recorder: Any, fast_host_heartbeats: None
) -> None:
    hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses)
    try:
        procs = hosts.spawn_procs(per_host={"gpus": 2}, name="onhosts")
        actors = procs.spawn("lost", Where)
        orphans = [pid for pid, _, _ in actors.slice(hosts=1).where.call().get(timeout=30).values()]
        started = time.monotonic()
        two_workers.procs[1].send_signal(signal.SIGKILL)
        texts = fault_recorder.wait_for(2, timeout=20)
        for pid in orphans:  # no proc outlives its host agent (its zygote kills them)
            assert exits(pid, 20), f"proc {pid} of the killed host still runs"
        took = time.monotonic() - started
        joined = "\n".join(texts)
        assert "crashed_ranks=[2]" in joined and "crashed_ranks=[3]" in joined
        assert took < 10
        with pytest.raises(SupervisionError):
            actors.slice(hosts=1).where.call().get(timeout=10)
        assert len(actors.slice(hosts=0).where.call().get(timeout=10)) == 2
    finally:
        hosts.shutdown().get(timeout=30)


@pytest.mark.timeout(90)
def test_a_host_restarted_at_a_lost_hosts_address_can_be_attached(
    fault_recorder: Any, fast_host_heartbeats: None
) -> None:
    """A lost host stays dead, but another host process at its address is another host: the
    client that saw the first one die attaches to the second (per incarnation, not address)."""
    first = Workers(["127.0.0.4"])
    addr = first.addresses[0]
    try:
        hosts = attach_to_workers(ca=TRUST, workers=[addr])
        procs = hosts.spawn_procs(per_host={"gpus": 1})
        procs.spawn("first", Where).where.call_one().get(timeout=30)
        first.procs[0].send_signal(signal.SIGKILL)
        fault_recorder.wait_for(1, timeout=30)
        first.procs[0].wait(timeout=30)
        second = _worker_at(addr)
        try:
            again = attach_to_workers(ca=TRUST, workers=[addr])
            try:
                mesh = again.spawn_procs(per_host={"gpus": 1}).spawn("second", Where)
                assert mesh.where.call_one().get(timeout=30)[0] != 0
            finally:
                again.shutdown().get(timeout=30)
        finally:
            end_processes([second])
    finally:
        first.close()


def _worker_at(addr: str) -> subprocess.Popen[bytes]:
    """A `monarch worker` listening at `addr` (a port another worker used before)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "monarch._src.hosts.worker_cli", "--address", addr],
        env=worker_env(), stdin=subprocess.DEVNULL, cwd=REPO)
    host, port = addr.split("://")[1].rsplit(":", 1)
    wait_listening(proc, host, int(port))
    return proc


_CLIENT = r"""
import os, sys
from monarch.actor import Actor, endpoint, attach_to_workers
class P(Actor):
    @endpoint
    def pid(self):
        return os.getpid()
hosts = attach_to_workers(ca="trust_all_connections", workers=[sys.argv[1]])
pids = hosts.spawn_procs(per_host={"gpus": 2}).spawn("p", P).pid.call().get(timeout=30)
print(" ".join(str(v) for _, v in pids.items()), flush=True)
os._exit(0)  # gone without detaching
"""


@pytest.mark.timeout(60)
def test_worker_kills_a_lost_clients_procs_and_serves_the_next() -> None:
    workers = Workers(["0.0.0.0"])  # every interface; clients dial one of them
    dial = workers.addresses[0].replace("0.0.0.0", "127.0.0.4")
    try:
        out = subprocess.run([sys.executable, "-c", _CLIENT, dial],
                             env=worker_env(), cwd=REPO, capture_output=True, timeout=45)
        assert out.returncode == 0, out.stderr.decode()[-2000:]
        pids = [int(p) for p in out.stdout.split()]
        assert len(pids) == 2
        deadline = time.monotonic() + 20
        while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(process_alive(p) for p in pids)
        hosts = attach_to_workers(ca=TRUST, workers=[dial])
        try:
            mesh = hosts.spawn_procs().spawn("next", Where)
            got = mesh.where.call_one().get(timeout=30)
            assert _host(got[1]) == "127.0.0.4"  # procs listen where the client dialed
        finally:
            hosts.shutdown().get(timeout=30)
        assert workers.procs[0].wait(timeout=20) == 0
    finally:
        workers.close()


def test_attach_rejects_bad_arguments() -> None:
    with pytest.raises(NotImplementedError, match="trust_all_connections"):
        attach_to_workers(ca="my-ca.pem", workers=["tcp://127.0.0.2:1234"])
    with pytest.raises(ValueError, match="scheme 'udp'"):
        attach_to_workers(ca=TRUST, workers=["udp://127.0.0.2:1234"])
    with pytest.raises(ValueError, match="absolute socket path"):
        attach_to_workers(ca=TRUST, workers=["ipc://w0"])
    with pytest.raises(ValueError, match="empty"):
        attach_to_workers(ca=TRUST, workers=[])
    with pytest.raises(ValueError, match="needs a host and a port"):
        attach_to_workers(ca=TRUST, workers=["tcp://nohost"])
    with pytest.raises(TypeError, match="list of addresses"):
        attach_to_workers(ca=TRUST, workers="tcp://127.0.0.2:1234")


@pytest.mark.timeout(30)
def test_unreachable_host_is_named(fast_host_heartbeats: None) -> None:
    port = free_port("127.0.0.5")  # nobody listens there
    addr = f"tcp://127.0.0.5:{port}"
    hosts = attach_to_workers(ca=TRUST, workers=[addr])
    with pytest.raises(RuntimeError, match=f"could not attach to the host {addr}"):
        hosts.initialized.get(timeout=20)
    procs = hosts.spawn_procs()
    with pytest.raises(Exception, match="127.0.0.5"):
        procs.initialized.get(timeout=20)
    hosts.shutdown().get(timeout=10)


@pytest.mark.timeout(30)
def test_loopback_client_cannot_use_a_remote_host() -> None:
    hosts = attach_to_workers(ca=TRUST, workers=["tcp://192.0.2.77:26600"])
    with pytest.raises(RuntimeError, match=r"enable_transport\('tcp'\)"):
        hosts.initialized.get(timeout=20)
    hosts.shutdown().get(timeout=10)


@pytest.mark.timeout(60)
def test_hosts_from_config_without_a_cluster_starts_two_local_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MONARCH_TEST_HOSTS", raising=False)
    hosts = hosts_from_config("MONARCH_TEST_HOSTS")
    workers = hosts._agent._on_shutdown.__self__  # the stand-in's worker processes
    try:
        assert hosts.extent.sizes == [2]
        mesh = hosts.spawn_procs(per_host={"gpus": 1}).spawn("cfg", Where)
        pids = [v[0] for _, v in mesh.where.call().get(timeout=30).items()]
        assert len(set(pids)) == 2
    finally:
        hosts.shutdown().get(timeout=30)
    assert all(p.poll() is not None for p in workers.procs)


def test_worker_cli_rejects_bad_addresses(capsys: pytest.CaptureFixture[str]) -> None:
    from monarch._src.hosts.worker_cli import main

    assert main(["--address", "udp://127.0.0.1:5000"]) == 2
    assert "scheme 'udp'" in capsys.readouterr().err
    assert main(["--address", "ipc://relative/x"]) == 2
    assert "needs an absolute socket path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])


def test_actor_error_still_travels_from_remote_procs(two_workers: Workers) -> None:
    class Boom(Actor):
        @endpoint
        def boom(self) -> None:
            raise ValueError("remote boom")

    hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses)
    try:
        second = hosts.slice(hosts=1)  # a slice places procs on its hosts only
        procs = second.spawn_procs(per_host={"gpus": 1})
        assert procs.extent.sizes == [1]
        mesh = procs.spawn("boom", Boom)
        with pytest.raises(ActorError, match="remote boom"):
            mesh.boom.call_one().get(timeout=30)
        where = procs.spawn("where", Where).where.call_one().get(timeout=30)
        assert _host(where[1]) == "127.0.0.3"
    finally:
        hosts.shutdown().get(timeout=30)


class Talker(Actor):
    @endpoint
    def say(self, text: str) -> None:
        print(text, flush=True)


@pytest.mark.timeout(60)
def test_remote_proc_output_is_forwarded_to_the_client(
    two_workers: Workers, capsys: pytest.CaptureFixture[str]
) -> None:
    from monarch.config import configured

    with configured(enable_log_forwarding=True):
        hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses)
        try:
            procs = hosts.spawn_procs(name="talkers")
            mesh = procs.spawn("talk", Talker)
            mesh.say.call("hello from a remote host").get(timeout=30)
            hosts._agent.flush_logs().result(timeout=30)
            out = capsys.readouterr().out
            assert out.count("hello from a remote host") == 2
        finally:
            hosts.shutdown().get(timeout=30)


def test_tcp_transport_listens_on_a_routable_address() -> None:
    from monarch._src.config import ChannelTransport
    from monarch._src.runtime.runtime import _listen_address, routable_ip
    from monarch.config import configured

    with configured(default_transport=ChannelTransport.TcpWithHostname):
        assert _listen_address() == f"tcp://{routable_ip()}:0"
    with configured(default_transport="tcp://10.1.2.3:0"):
        assert _listen_address() == "tcp://10.1.2.3:0"


@pytest.mark.timeout(60)
def test_admin_view_shows_procs_and_actors_on_attached_hosts(two_workers: Workers) -> None:
    from monarch._src.admin.model import collect, find_proc

    hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses)
    try:
        procs = hosts.spawn_procs(per_host={"gpus": 1}, name="watched")
        actors = procs.spawn("watched_actors", Where)
        actors.where.call().get(timeout=30)
        snap = collect()
        mine = [p for p in snap["procs"] if p["mesh"] == "watched"]
        assert sorted(_host(p["host"]) for p in mine) == ["127.0.0.2", "127.0.0.3"]
        assert {p["state"] for p in mine} == {"running"}
        names = {h["name"] for h in snap["hosts"]}
        assert {p["host"] for p in mine} <= names
        watched = [a for a in snap["actors"] if a["mesh"] == "watched_actors"]
        assert sorted(a["rank"] for a in watched) == [0, 1]
        assert all(a["sent"] >= 1 for a in watched)
        # `monarch stacks watched_actors 1` finds the proc on the second host.
        assert find_proc("watched_actors", 1) in procs._table.keys
    finally:
        hosts.shutdown().get(timeout=30)


class Affinity(Actor):
    @endpoint
    def cpus(self) -> list[int]:
        return sorted(os.sched_getaffinity(0))


@pytest.mark.timeout(90)
def test_proc_bind_pins_procs_on_remote_hosts_and_names_a_binding_they_cannot_honour(
    two_workers: Workers, fault_recorder: Any
) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    hosts = attach_to_workers(ca=TRUST, workers=two_workers.addresses)
    try:
        procs = hosts.spawn_procs(per_host={"gpus": 2}, proc_bind=[
            {"cpus": str(allowed[0])}, {"cpus": str(allowed[1])}])
        got = procs.spawn("pinned", Affinity).cpus.call().get(timeout=30)
        by_rank = {point["hosts"] * 2 + point["gpus"]: cpus for point, cpus in got.items()}
        assert [by_rank[r] for r in range(4)] == [[allowed[0]], [allowed[1]]] * 2
        # Checked by each host against its own CPUs: the procs fail, saying why.
        bad = hosts.spawn_procs(per_host={"gpus": 1}, proc_bind=[{"cpus": "100000"}])
        with pytest.raises(SupervisionError, match="which this process may not use"):
            bad.spawn("never", Affinity).cpus.call().get(timeout=30)
    finally:
        hosts.shutdown().get(timeout=30)


def test_alias_address_gives_the_worker_its_bind_half_and_clients_the_dial_half() -> None:
    from monarch._src.hosts.addresses import parse_worker_address

    alias = "tcp://10.0.0.5:26600@tcp://0.0.0.0:26600"
    assert parse_worker_address(alias) == ("tcp", "10.0.0.5", 26600)
    assert parse_worker_address(alias, wildcard=True) == ("tcp", "0.0.0.0", 26600)
    with pytest.raises(ValueError, match="more than one '@'"):
        parse_worker_address(alias + "@tcp://0.0.0.0:1")
    with pytest.raises(ValueError, match="is a wildcard"):  # a dial half must be dialable
        parse_worker_address("tcp://0.0.0.0:26600@tcp://0.0.0.0:26600")


@pytest.mark.timeout(60)
def test_a_worker_started_with_an_alias_is_attached_through_it() -> None:
    port = free_port("127.0.0.1")
    alias = f"tcp://127.0.0.1:{port}@tcp://0.0.0.0:{port}"
    worker = subprocess.Popen(
        [sys.executable, "-m", "monarch._src.hosts.worker_cli", "--address", alias],
        env=worker_env(), stdin=subprocess.DEVNULL, cwd=REPO)
    try:
        wait_listening(worker, "127.0.0.1", port)
        hosts = attach_to_workers(ca=TRUST, workers=[alias])
        got = hosts.spawn_procs(per_host={"gpus": 1}).spawn("w", Where).where.call().get(timeout=30)
        assert [_host(v[1]) for _, v in got.items()] == ["127.0.0.1"]
        hosts.shutdown().get(timeout=30)
        assert worker.wait(timeout=20) == 0
    finally:
        end_processes([worker])


def test_a_worker_on_an_ipc_socket_is_attached_over_it(tmp_path: Any) -> None:
    # Monarch's ProcessJob form: a worker of this machine listening on a unix-domain socket.
    addr = f"ipc://{tmp_path}/w0"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from monarch.actor import run_worker_loop_forever; "
         "run_worker_loop_forever(address=sys.argv[1], ca='trust_all_connections')", addr],
        env=worker_env(), cwd=REPO, stdin=subprocess.DEVNULL)
    try:
        hosts = attach_to_workers(ca=TRUST, workers=[addr])
        procs = hosts.spawn_procs(per_host={"gpus": 2})
        pids = procs.spawn("ipc", Where).where.call().get(timeout=60)
        assert len({v[0] for v in pids.values()}) == 2
        hosts.shutdown().get(timeout=30)
        assert proc.wait(timeout=60) == 0
    finally:
        end_processes([proc])
