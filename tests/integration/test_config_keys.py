"""Config keys and arguments that change what the runtime does: one test per key or argument,
each proving the effect on real procs (or the refusal, where a value has no meaning here).

The refusals of keys that only accept their default are tested in tests/unit/test_config.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import itertools
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monarch._src import config as internal
from monarch._src.supervision.errors import SupervisionError
from monarch.actor import Actor, endpoint, this_host
from monarch.config import configured
from tests.conftest import FaultRecorder, guard_stray_faults

REPO = Path(__file__).resolve().parents[2]
STOP_TIMEOUT = 120


@pytest.fixture(scope="module", autouse=True)
def stray_faults() -> Iterator[None]:
    yield from guard_stray_faults(__name__)


@pytest.fixture(autouse=True)
def restore_config() -> Iterator[None]:
    saved = internal.runtime_snapshot()
    yield
    internal.apply_snapshot(saved)


def _agent() -> Any:
    from monarch._src.hosts import local

    assert local._agent is not None
    return local._agent


def _exit_status(pid: int) -> str:
    """What the local host's child watch reported for `pid` ("Exited(0)", "Killed(sig=9)")."""
    agent = _agent()
    with agent._lock:
        fut = agent._exited[pid]
    return str(fut.result(timeout=STOP_TIMEOUT))


class Probe(Actor):
    """Reports facts about the proc it runs in."""

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def pdeathsig(self) -> int:
        """The parent-death signal of the proc's main thread (the setting is per thread, and
        the proc's main thread runs its runtime loop)."""
        from monarch._src.runtime.runtime import get_runtime

        def read() -> int:
            libc = ctypes.CDLL(None, use_errno=True)
            sig = ctypes.c_int(0)
            libc.prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
            return sig.value

        answer: concurrent.futures.Future[int] = concurrent.futures.Future()
        get_runtime().loop.call_soon_threadsafe(lambda: answer.set_result(read()))
        return answer.result(timeout=30)

    @endpoint
    def affinity(self) -> list[int]:
        return sorted(os.sched_getaffinity(0))

    @endpoint
    def say(self, lines: list[str], err: str) -> None:
        for line in lines:
            print(line, flush=True)
        if err:
            print(err, file=sys.stderr, flush=True)

    @endpoint
    def die(self) -> None:
        os._exit(3)


# -- mesh_bootstrap_enable_pdeathsig -------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("enabled", "expected"), [(True, 9), (False, 0)])
def test_pdeathsig_key_decides_whether_procs_die_with_their_fork_server(
    enabled: bool, expected: int
) -> None:
    with configured(mesh_bootstrap_enable_pdeathsig=enabled):
        procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        probe = procs.spawn("pdeathsig", Probe)
        assert probe.pdeathsig.call_one().get(timeout=60) == expected
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)


# -- stop_actor_timeout, proc_stop_max_idle, mesh_terminate_timeout, concurrency -----------


class SlowCleanup(Actor):
    """An actor whose __cleanup__ waits for an event nobody sets (a stuck cleanup)."""

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    def __cleanup__(self, exc: BaseException | None) -> None:
        threading.Event().wait()


def _stop_with_stuck_cleanup(name: str, **keys: str) -> str:
    """Stop a proc whose actor's `__cleanup__` never returns, under the config `keys`; how the
    proc ended, as the local host saw it."""
    with configured(**keys):
        procs = this_host().spawn_procs(per_host={"gpus": 1})
        actor = procs.spawn(name, SlowCleanup)
        pid = actor.pid.call_one().get(timeout=60)
        procs.stop().get(timeout=STOP_TIMEOUT)
    return _exit_status(pid)


@pytest.mark.timeout(120)
def test_stop_actor_timeout_bounds_actor_stop_then_the_proc_exits_cleanly() -> None:
    # Without stop_actor_timeout the cleanup would hold the proc for cleanup_timeout (10 min),
    # and the host would kill it after proc_stop_max_idle + mesh_terminate_timeout.
    ended = _stop_with_stuck_cleanup("slow_cleanup", cleanup_timeout="10m",
                                     stop_actor_timeout="1s", proc_stop_max_idle="10m",
                                     mesh_terminate_timeout="10m")
    assert ended == "Exited(0)"


@pytest.mark.timeout(120)
def test_proc_stop_max_idle_and_mesh_terminate_timeout_kill_a_proc_that_will_not_stop() -> None:
    ended = _stop_with_stuck_cleanup("stuck_cleanup", cleanup_timeout="10m",
                                     stop_actor_timeout="10m", proc_stop_max_idle="1s",
                                     mesh_terminate_timeout="1s")
    assert ended == "Killed(sig=9)"


class Timed(Actor):
    """Records when its cleanup ran, in a file per rank."""

    def __init__(self, folder: str) -> None:
        from monarch.actor import current_rank

        self.path = os.path.join(folder, f"{current_rank().rank}.json")

    @endpoint
    def ready(self) -> None:
        pass

    def __cleanup__(self, exc: BaseException | None) -> None:
        start = time.monotonic()
        threading.Event().wait(0.5)  # work that takes a while; overlaps unless serialized
        with open(self.path, "w") as handle:
            json.dump([start, time.monotonic()], handle)


@pytest.mark.timeout(120)
def test_mesh_terminate_concurrency_one_stops_procs_one_at_a_time(tmp_path: Path) -> None:
    with configured(mesh_terminate_concurrency=1):
        procs = this_host().spawn_procs(per_host={"gpus": 3})
        actors = procs.spawn("timed", Timed, str(tmp_path))
        actors.ready.call().get(timeout=60)
        procs.stop().get(timeout=STOP_TIMEOUT)
    spans = sorted(json.loads(p.read_text()) for p in tmp_path.glob("*.json"))
    assert len(spans) == 3
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, spans


# -- mesh_proc_spawn_max_idle, actor_spawn_max_idle ----------------------------------------


def block_forever() -> None:
    """A bootstrap that never returns: its proc never reports ready."""
    threading.Event().wait()


@pytest.mark.timeout(120)
def test_mesh_proc_spawn_max_idle_fails_procs_that_never_become_ready(
    fault_recorder: FaultRecorder,
) -> None:
    with configured(mesh_proc_spawn_max_idle="1s"):
        procs = this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=block_forever)
    try:
        with pytest.raises(SupervisionError, match="mesh_proc_spawn_max_idle") as info:
            procs.initialized.get(timeout=60)
        assert "did not become ready within" in str(info.value)
        faults = fault_recorder.wait_for(2, timeout=60)  # the owner hears of both procs
        assert all("mesh_proc_spawn_max_idle (1s" in text for text in faults), faults
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)


class SlowInit(Actor):
    def __init__(self) -> None:
        threading.Event().wait(3600)

    @endpoint
    def ping(self) -> int:
        return 1


@pytest.mark.timeout(120)
def test_actor_spawn_max_idle_fails_initialized_of_actors_stuck_in_init() -> None:
    with configured(actor_spawn_max_idle="1s", stop_actor_timeout="1s"):
        procs = this_host().spawn_procs(per_host={"gpus": 1})
        try:
            actors = procs.spawn("slow_init", SlowInit)
            with pytest.raises(SupervisionError, match=r"actor_spawn_max_idle \(1s\)"):
                actors.initialized.get(timeout=60)
        finally:
            procs.stop().get(timeout=STOP_TIMEOUT)


# -- enable_file_capture, prefix_with_rank, tail_log_lines ---------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("prefix", "tag"), [(True, "[{rank}] "), (False, "")])
def test_enable_file_capture_writes_each_procs_output_to_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: bool, tag: str
) -> None:
    monkeypatch.setenv("MONARCH_LOG_DIR", str(tmp_path))
    with configured(enable_file_capture=True, prefix_with_rank=prefix):
        procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        probe = procs.spawn("capture", Probe)
        probe.say.call(["alpha", "beta"], "gamma").get(timeout=60)
        _agent().flush_logs().result(timeout=60)
        ids = _agent()._procs
        for rank in range(2):
            proc_id = next(p for p, (t, r) in ids.items() if t is procs._table and r == rank)
            t = tag.format(rank=rank)
            # (the runtime may log to stderr too, e.g. under load: only our lines are checked)
            out = (tmp_path / f"{proc_id}.stdout").read_text().splitlines()
            err = (tmp_path / f"{proc_id}.stderr").read_text().splitlines()
            assert [line for line in out if line.endswith(("alpha", "beta"))] == [
                f"{t}alpha", f"{t}beta"], out
            assert [line for line in err if line.endswith("gamma")] == [f"{t}gamma"], err
            assert all(line.startswith(t) for line in out + err), (out, err)
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)


@pytest.mark.timeout(120)
def test_enable_file_capture_off_writes_no_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONARCH_LOG_DIR", str(tmp_path))
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        procs.spawn("no_capture", Probe).say.call(["alpha"], "beta").get(timeout=60)
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lines", [2, 0])
def test_tail_log_lines_appends_the_last_lines_to_a_failure_report(lines: int) -> None:
    import monarch.actor

    faults: list[Any] = []
    saved = monarch.actor.unhandled_fault_hook
    monarch.actor.unhandled_fault_hook = faults.append
    try:
        with configured(tail_log_lines=lines):
            procs = this_host().spawn_procs(per_host={"gpus": 2})
        probe = procs.spawn("tail", Probe)
        probe.say.call(["one", "two", "three"], "").get(timeout=60)
        _agent().flush_logs().result(timeout=60)  # every line reached the host agent
        with pytest.raises(SupervisionError) as info:
            probe.slice(gpus=1).die.call().get(timeout=60)
        report = str(info.value)
        assert "exited with non-zero code 3" in report
        if lines:
            tail = [line.strip()
                    for line in report.partition("last 2 lines of its output:\n")[2].split("\n")]
            # what the proc wrote last: our lines, unless the runtime logged after them
            assert len(tail) == 2 and all(line.startswith("[1] ") for line in tail), report
            assert "[1] one" not in tail, report
        else:
            assert "lines of its output" not in report
        procs.stop().get(timeout=STOP_TIMEOUT)
    finally:
        monarch.actor.unhandled_fault_hook = saved


# -- spawn_procs(proc_bind=...) -------------------------------------------------------------


@pytest.mark.timeout(120)
def test_proc_bind_pins_each_proc_to_its_cpus() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("needs two CPUs")
    first, second = allowed[0], allowed[1]
    procs = this_host().spawn_procs(
        per_host={"gpus": 2}, proc_bind=[{"cpus": str(first)}, {"physcpubind": str(second)}])
    try:
        got = procs.spawn("bound", Probe).affinity.call().get(timeout=60)
        assert [v for _, v in got.items()] == [[first], [second]]
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)


@pytest.mark.parametrize(
    ("binding", "error", "fragment"),
    [
        ({"membind": "0"}, ValueError, "'membind' (a NUMA memory policy) is not supported"),
        ({"cpu": "0"}, ValueError, "unknown keys ['cpu']"),
        ({"cpus": "0-x"}, ValueError, "is not a list such as '0-3,8'"),
        ({"cpus": "100000"}, ValueError, "which this process may not use"),
        ({"cpunodebind": "4096"}, ValueError, "NUMA node 4096 does not exist"),
        ("0", TypeError, "must be a dict"),
    ],
)
def test_proc_bind_bad_entry_is_refused_before_spawning(
    binding: Any, error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as info:
        this_host().spawn_procs(per_host={"gpus": 1}, proc_bind=[binding])
    assert fragment in str(info.value)


def test_proc_bind_of_the_wrong_length_is_refused_with_torchmonarchs_text() -> None:
    with pytest.raises(ValueError, match=r"proc_bind length \(1\) must equal procs_per_host \(4\)"):
        this_host().spawn_procs(per_host={"gpus": 4}, proc_bind=[{"cpunodebind": "0"}])


# -- default_transport: unix sockets, refused transports -----------------------------------

_UNIX_PROGRAM = textwrap.dedent("""
    import sys
    from monarch.actor import Actor, endpoint, enable_transport, this_host

    class Where(Actor):
        @endpoint
        def scheme(self) -> str:
            from monarch._src.runtime.runtime import get_runtime
            return get_runtime().address.partition("://")[0]

    enable_transport(sys.argv[1])
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    got = procs.spawn("where", Where).scheme.call().get(timeout=60)
    from monarch._src.runtime.runtime import get_runtime
    print(get_runtime().address.partition("://")[0], sorted(v for _, v in got.items()))
    procs.stop().get(timeout=60)
""")


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("word", "scheme"), [("unix", "unix"), ("ipc", "unix"),
                                              ("explicit", "unix"), ("tcp-localhost", "tcp")])
def test_enable_transport_unix_makes_client_and_procs_use_unix_sockets(
    tmp_path: Path, word: str, scheme: str
) -> None:
    if word == "explicit":  # the client at a given path, its procs at fresh ones
        word = f"unix://{tmp_path}/client.sock"
    script = tmp_path / "unix_transport.py"
    script.write_text(_UNIX_PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONARCH_", "HYPERACTOR_"))}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, str(script), word], capture_output=True, text=True,
                          timeout=150, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{scheme} ['{scheme}', '{scheme}']"


def test_unix_transport_with_tls_is_refused() -> None:
    from monarch._src.transport.comm import default_listen_address

    with configured(default_transport="unix", enable_tls=True):
        with pytest.raises(ValueError, match="unix-domain sockets are not encrypted"):
            default_listen_address()
    with configured(default_transport="unix"):
        assert default_listen_address().startswith("unix:///")


# -- channel_tcp_congestion, small_write_threshold -----------------------------------------


def _connected_socket(algorithm: str, keepalive: str = "1m") -> socket.socket:
    """Two transports over loopback tcp; the socket the sender took over from its comm. (The
    side door that loopback peers use on Linux is closed here: the options are tcp's.)"""
    from monarch._src.transport import tcp
    from monarch._src.transport.comm import Transport

    async def run() -> socket.socket:
        got: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        a = Transport(lambda peer, envs: got.done() or got.set_result(envs),
                      lambda *args: None, {})
        b = Transport(lambda *args: None, lambda *args: None, {})
        try:
            where = await a.start("tcp://127.0.0.1:0")
            await b.start("tcp://127.0.0.1:0")
            b.send(where, ("hello",))
            assert await asyncio.wait_for(got, 30) == [("hello",)]
            return b._peers[where].channel.sock.dup()  # type: ignore[union-attr]
        finally:
            await a.close()
            await b.close()

    doors, tcp.SIDE_DOORS = tcp.SIDE_DOORS, False
    try:
        with configured(channel_tcp_congestion=algorithm, channel_tcp_keepalive_idle=keepalive):
            return asyncio.run(run())
    finally:
        tcp.SIDE_DOORS = doors


def _congestion(sock: socket.socket) -> str:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    return raw.split(b"\0", 1)[0].decode()


@pytest.mark.timeout(60)
def test_channel_tcp_congestion_sets_the_algorithm_of_proc_connections() -> None:
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
    if not available.exists() or "reno" not in available.read_text().split():
        pytest.skip("needs Linux with the reno algorithm")
    with _connected_socket("reno") as sock:
        assert _congestion(sock) == "reno"
    default = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    with _connected_socket("") as sock:
        assert _congestion(sock) == default


@pytest.mark.timeout(60)
def test_channel_tcp_congestion_unknown_algorithm_is_logged_and_default_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    default = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    with caplog.at_level("WARNING"), _connected_socket("nosuchalgo") as sock:
        assert _congestion(sock) == default
    assert "channel_tcp_congestion='nosuchalgo' was refused by the kernel" in caplog.text


@pytest.mark.timeout(60)
def test_channel_tcp_keepalive_idle_sets_the_keepalive_of_proc_connections() -> None:
    for setting, seconds in (("1m", 60), ("17s", 17)):
        with _connected_socket("", keepalive=setting) as sock:
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == seconds


def _fake_py_spy(folder: Path, body: str) -> Path:
    script = folder / "fake-py-spy"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


@pytest.mark.timeout(60)
def test_pyspy_bin_names_the_py_spy_that_stack_dumps_run(tmp_path: Path) -> None:
    from monarch._src.admin.stacks import _py_spy

    script = _fake_py_spy(tmp_path, 'echo "dump of $3"')
    with configured(pyspy_bin=str(script)):
        assert _py_spy(1234) == ("dump of 1234\n", "")
    with configured(pyspy_bin=str(tmp_path / "absent")):
        assert _py_spy(1234) == (None, f"pyspy_bin {str(tmp_path / 'absent')!r} is not an "
                                       "executable")


@pytest.mark.timeout(60)
def test_mesh_admin_pyspy_timeout_bounds_a_py_spy_dump(tmp_path: Path) -> None:
    from monarch._src.admin.stacks import _py_spy

    script = _fake_py_spy(tmp_path, "exec sleep 600")  # a py-spy that never finishes
    with configured(pyspy_bin=str(script), mesh_admin_pyspy_timeout="1s"):
        assert _py_spy(1234) == (None, "timed out after 1 s (mesh_admin_pyspy_timeout)")


def test_small_write_threshold_decides_which_buffers_are_sent_by_reference() -> None:
    import numpy as np

    from monarch._src.transport.serialization import dumps, loads

    array = np.arange(250, dtype=np.int32)  # 1000 bytes
    _, buffers = dumps(array)
    assert buffers == []  # under the default 64 KiB: copied into the message
    with configured(small_write_threshold=512):
        head, buffers = dumps(array)
    assert len(buffers) == 1 and memoryview(buffers[0]).nbytes == 1000
    assert (loads(head, buffers) == array).all()


class Sizer(Actor):
    @endpoint
    def total(self, chunks: list[bytes]) -> int:
        return sum(len(chunk) for chunk in chunks)


@pytest.mark.timeout(120)
def test_codec_max_frame_length_refuses_a_bigger_message_at_the_sender() -> None:
    from monarch._src.supervision.errors import MessageTooLargeError

    procs = this_host().spawn_procs(per_host={"procs": 1})
    try:
        sizer = procs.spawn("sizer", Sizer)
        chunks = [bytes(256 * 1024) for _ in range(4)]  # 1 MiB of payload, plus the envelope
        with configured(codec_max_frame_length=1024 * 1024):
            with pytest.raises(MessageTooLargeError, match="over codec_max_frame_length") as info:
                sizer.total.call_one(chunks).get(timeout=60)
            # Both what Meta's Monarch raises and what the mistake is.
            assert isinstance(info.value, SupervisionError)
            assert isinstance(info.value, ValueError)
            assert sizer.total.call_one(chunks[:3]).get(timeout=60) == 3 * 256 * 1024
        with configured(codec_max_frame_length=2 * 1024 * 1024):
            assert sizer.total.call_one(chunks).get(timeout=60) == 1024 * 1024
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)


# -- host_spawn_ready_timeout, remote hosts: remote_alloc_allowed_port_range, tails --------


@pytest.mark.timeout(120)
def test_host_spawn_ready_timeout_fails_an_attach_whose_worker_never_starts() -> None:
    from monarch.actor import attach_to_workers

    never: concurrent.futures.Future[str] = concurrent.futures.Future()
    with configured(host_spawn_ready_timeout="1s"):
        hosts = attach_to_workers(workers=[never], ca="trust_all_connections")
        with pytest.raises(RuntimeError, match="could not attach to the host") as info:
            hosts.initialized.get(timeout=60)
    assert "did not resolve within host_spawn_ready_timeout (1s)" in str(info.value)
    assert not never.cancelled()


@pytest.mark.timeout(60)
def test_port_range_makes_a_proc_listen_on_the_first_free_port_of_the_range() -> None:
    from monarch._src.hosts.proc_main import _listen
    from monarch._src.runtime.mailbox import Mailbox

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
    busy = socket.socket()
    busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    busy.bind(("127.0.0.1", base))
    busy.listen()

    async def run(ports: tuple[int, int]) -> str:
        mailbox = Mailbox(asyncio.get_running_loop())
        try:
            return await _listen(mailbox, {"listen": "tcp://127.0.0.1:0", "port_range": ports,
                                           "proc_id": "p0"})
        finally:
            await mailbox.transport.close()

    try:
        address = asyncio.run(run((base, base + 50)))
        assert base < int(address.rsplit(":", 1)[1]) < base + 50
        with pytest.raises(OSError, match="no free port in remote_alloc_allowed_port_range"):
            asyncio.run(run((base, base + 1)))
    finally:
        busy.close()


class Address(Actor):
    @endpoint
    def port(self) -> int:
        from monarch._src.runtime.runtime import get_runtime

        return int(get_runtime().address.rsplit(":", 1)[1])


@pytest.mark.timeout(180)
def test_remote_alloc_allowed_port_range_on_a_worker_bounds_its_procs_ports(
    fault_recorder: FaultRecorder,
) -> None:
    from monarch.actor import attach_to_workers
    from tests.hosts.conftest import end_processes, free_port, wait_listening, worker_env

    base = free_port("127.0.0.1")
    low, high = base + 100, base + 140
    port = free_port("127.0.0.1")
    env = dict(worker_env(), MONARCH_REMOTE_ALLOC_ALLOWED_PORT_RANGE=f"{low}..{high}")
    worker = subprocess.Popen(
        [sys.executable, "-m", "monarch._src.hosts.worker_cli", "--address",
         f"tcp://127.0.0.1:{port}"], env=env, stdin=subprocess.DEVNULL, cwd=REPO)
    try:
        wait_listening(worker, "127.0.0.1", port)
        hosts = attach_to_workers(workers=[f"tcp://127.0.0.1:{port}"],
                                  ca="trust_all_connections")
        with configured(tail_log_lines=2):  # the client's setting reaches the remote host
            procs = hosts.spawn_procs(per_host={"gpus": 2})
        ports = procs.spawn("address", Address).port.call().get(timeout=60)
        assert all(low <= p < high for _, p in ports.items()), (low, high, ports)
        probe = procs.spawn("remote_tail", Probe)
        probe.say.call(["one", "two", "three"], "").get(timeout=60)
        hosts._agent.flush_logs().result(timeout=60)
        with pytest.raises(SupervisionError):
            probe.slice(gpus=1).die.call().get(timeout=60)
        # The caller sees the connection break first; the owner gets the host's report.
        # (one fault per actor mesh with an actor on that proc)
        fault = fault_recorder.wait_for(1, timeout=60)[0]
        assert "exited with non-zero code 3" in fault
        tail = [line.strip() for line in fault.partition("last 2 lines of its output:\n")[2]
                .rstrip(")").split("\n")]
        assert len(tail) == 2 and all(line.startswith("[1] ") for line in tail), fault
        assert "[1] one" not in tail, fault
        procs.stop().get(timeout=STOP_TIMEOUT)
        hosts.shutdown().get(timeout=STOP_TIMEOUT)
    finally:
        end_processes([worker])


# -- KubernetesJob(attach_to=...) ------------------------------------------------------------


def test_kubernetes_attach_to_is_checked_and_reaches_exactly_one_pod() -> None:
    from monarch.job.kubernetes import KubernetesJob

    with pytest.raises(ValueError, match=r"KubernetesJob\(attach_to=\.\.\.\)"):
        KubernetesJob("ns", attach_to="http://somewhere:80", api=object())
    job = KubernetesJob("ns", attach_to="tcp://127.0.0.1:26600", api=object())
    assert job._through_attach_to({"trainers": ["tcp://10.0.0.7:26600"]}) == {
        "trainers": ["tcp://127.0.0.1:26600"]}
    with pytest.raises(ValueError, match="reaches a single pod, but this job has 3 pods"):
        job._through_attach_to({"trainers": ["a", "b"], "ps": ["c"]})


# -- as_endpoint(propagate=...) --------------------------------------------------------------


class Plain(Actor):
    def make(self) -> Any:
        import torch

        from monarch.actor import current_rank

        return torch.full((2,), float(current_rank()["gpus"] + 1))


@pytest.mark.timeout(180)
def test_as_endpoint_propagate_shapes_rref_results() -> None:
    torch = pytest.importorskip("torch")
    import monarch
    from monarch.actor import as_endpoint

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        plain = procs.spawn("plain", Plain)
        with procs.activate():
            with pytest.raises(ValueError, match="propagate"):
                as_endpoint(plain.make).rref()
            y = as_endpoint(plain.make, propagate=lambda: torch.empty(2)).rref()
            got = [monarch.inspect(y * 10, gpus=g).tolist() for g in range(2)]
        assert got == [[10.0, 10.0], [20.0, 20.0]]
    finally:
        procs.stop().get(timeout=STOP_TIMEOUT)
