"""The version check on attach (`hosts/versions.py`): what a host reports, how reports compare
and print, and what `version_check` ("warn", "ignore", "error") does when real `monarch worker`
hosts (and a Dask LocalCluster) attach.

A host with other versions is a real worker process whose `sys.path` starts with a directory
holding only `cloudpickle-0.0.1.dist-info`: its installed-distribution metadata says
cloudpickle 0.0.1 while the module it imports is still the real one, which is exactly what the
host reads and reports.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

import monarch
from monarch._src.hosts.remote_agent import RemoteHostAgent
from monarch._src.hosts.versions import (
    Mismatch,
    VersionMismatchWarning,
    check_host,
    collect,
    compare,
    format_table,
    warn_mismatches,
)
from monarch.actor import HostMesh, attach_to_workers
from monarch.config import configure, configured, get_global_config
from tests.hosts.conftest import REPO, end_processes, free_port, wait_listening, worker_env

pytestmark = pytest.mark.timeout(90)

TRUST = "trust_all_connections"
MINE = collect()
A, B, C = "tcp://10.0.0.2:26600", "tcp://10.0.0.3:26600", "tcp://10.0.0.4:26600"


# ---- what a process reports ----------------------------------------------------------------
def test_collect_reports_this_interpreter_and_installed_distributions() -> None:
    assert MINE["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert MINE["monarch"] == monarch.__version__ == version("monarch-dask")
    for package in ("torch", "cloudpickle", "numpy", "distributed"):
        assert MINE[package] == version(package)
    assert list(MINE) == ["python", "monarch", "torch", "cloudpickle", "numpy", "distributed"]


def test_collect_imports_nothing_it_reports() -> None:
    """Reading versions from metadata does not import torch (or numpy) just to print them."""
    code = ("import sys; from monarch._src.hosts.versions import collect; v = collect(); "
            "assert v['torch'] and v['numpy'], v; "
            "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, 'imported'")
    out = subprocess.run([sys.executable, "-c", code], env=worker_env(), cwd=REPO,
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()[-2000:]


# ---- comparing and printing (pure) -----------------------------------------------------------
def test_same_versions_compare_equal() -> None:
    assert compare(MINE, {A: dict(MINE), B: dict(MINE)}) == []


def test_each_distinct_host_version_is_listed_with_its_hosts() -> None:
    old = dict(MINE, cloudpickle="2.2.1")
    found = compare(MINE, {A: old, B: dict(MINE), C: old})
    assert found == [Mismatch("cloudpickle", str(MINE["cloudpickle"]),
                              (("2.2.1", (A, C)), (str(MINE["cloudpickle"]), (B,))))]


def test_missing_torch_and_missing_report_are_shown_not_failed() -> None:
    no_torch = dict(MINE, torch=None)
    found = {m.package: m for m in compare(MINE, {A: no_torch, B: None})}
    assert found["torch"].hosts == (("not installed", (A,)), ("not reported", (B,)))
    assert set(found) == set(MINE)  # a host too old to report differs in every package
    assert compare(no_torch, {A: dict(no_torch)}) == []  # absent on both sides: no difference


def test_many_hosts_with_one_version_are_counted_beyond_four() -> None:
    hosts = {f"h{i}": dict(MINE, numpy="1.0") for i in range(7)}
    (numpy,) = compare(MINE, hosts)
    assert numpy.hosts == (("1.0", tuple(hosts)),)
    assert "1.0 on h0, h1, h2, h3 and 3 more |" in format_table([numpy])


def test_table_layout() -> None:
    table = format_table([
        Mismatch("python", "3.11.7", (("3.10.14", ("a",)), ("3.11.7", ("b",)))),
        Mismatch("torch", "2.5.1", (("not installed", ("a", "b")),)),
    ])
    assert table == """\
+---------+------------+-----------------------+
| Package | Controller | Hosts                 |
+---------+------------+-----------------------+
| python  | 3.11.7     | 3.10.14 on a          |
|         |            | 3.11.7 on b           |
+---------+------------+-----------------------+
| torch   | 2.5.1      | not installed on a, b |
+---------+------------+-----------------------+"""


# ---- version_check (unit: crafted host reports) -----------------------------------------------
def test_config_key_accepts_three_values_and_refuses_others() -> None:
    for value in ("warn", "ignore", "error", " Error "):
        with configured(version_check=value):
            assert get_global_config()["version_check"] == value.strip().lower()
    assert get_global_config()["version_check"] == "warn"  # the default
    with pytest.raises(ValueError, match="'version_check' expects 'warn'.*'ignore' or 'error'"):
        configure(version_check="strict")


@pytest.mark.parametrize("mode", ["warn", "ignore", "error"])
def test_each_mode_on_a_crafted_report(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    old = dict(MINE, cloudpickle="0.0.1")
    with configured(version_check=mode), warnings.catch_warnings(record=True) as seen, \
            caplog.at_level(logging.WARNING, logger="monarch._src.hosts.versions"):
        warnings.simplefilter("always")
        if mode == "error":
            with pytest.raises(RuntimeError, match="its versions of cloudpickle differ") as info:
                check_host(A, old)
            assert f"| cloudpickle | {MINE['cloudpickle']}" in str(info.value)
            assert f"0.0.1 on {A}" in str(info.value) and "'error' now" in str(info.value)
        else:
            check_host(A, old)  # only "error" refuses a host
        check_host(A, dict(MINE))
        warn_mismatches({A: old, B: dict(MINE)})
    mismatch = [w for w in seen if issubclass(w.category, VersionMismatchWarning)]
    if mode == "warn":
        assert len(mismatch) == 1 and issubclass(mismatch[0].category, UserWarning)
        text = str(mismatch[0].message)
        assert f"0.0.1 on {A}" in text and f"{MINE['cloudpickle']} on {B}" in text
        assert "| python" not in text  # only what differs
        (record,) = caplog.records  # the same text, logged (after the actor prefix)
        assert record.getMessage().endswith(text)
    else:
        assert mismatch == [] and caplog.records == []


# ---- real hosts ------------------------------------------------------------------------------
def _start_worker(host: str, fake_dists: Path | None = None) -> tuple[subprocess.Popen[bytes],
                                                                         str]:
    """A `monarch worker` on `host`; `fake_dists` goes first on its sys.path."""
    port = free_port(host)
    env = worker_env()
    if fake_dists is not None:
        env["PYTHONPATH"] = f"{fake_dists}{os.pathsep}{env['PYTHONPATH']}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "monarch._src.hosts.worker_cli", "--address",
         f"tcp://{host}:{port}"], env=env, stdin=subprocess.DEVNULL, cwd=REPO)
    try:
        wait_listening(proc, host, port)
    except BaseException:
        end_processes([proc])
        raise
    return proc, f"tcp://{host}:{port}"


@pytest.fixture
def old_cloudpickle(tmp_path: Path) -> Path:
    """A directory whose only content says cloudpickle 0.0.1 is installed."""
    info = tmp_path / "cloudpickle-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cloudpickle\nVersion: 0.0.1\n")
    return tmp_path


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        end_processes(started)


def _attach_and_wait(addresses: list[str]) -> tuple[HostMesh, RemoteHostAgent,
                                                     list[warnings.WarningMessage]]:
    """Attach, wait until attached, and return the version warnings issued meanwhile."""
    hosts = attach_to_workers(ca=TRUST, workers=addresses)
    agent = hosts.agent
    assert isinstance(agent, RemoteHostAgent)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        hosts.initialized.get(timeout=45)  # the warning comes before initialized resolves
    return hosts, agent, [w for w in seen if issubclass(w.category, VersionMismatchWarning)]


def test_same_version_hosts_report_and_attach_silently(
        procs: list[subprocess.Popen[bytes]]) -> None:
    addresses = []
    for host in ("127.0.0.2", "127.0.0.3"):
        proc, addr = _start_worker(host)
        procs.append(proc)
        addresses.append(addr)
    hosts, agent, warned = _attach_and_wait(addresses)
    try:
        assert warned == []
        assert agent.host_versions() == {a: MINE for a in addresses}
    finally:
        hosts.shutdown().get(timeout=30)


def test_host_with_other_versions_warns_once_and_stays_usable(
        procs: list[subprocess.Popen[bytes]], old_cloudpickle: Path) -> None:
    old, old_addr = _start_worker("127.0.0.2", old_cloudpickle)
    same, same_addr = _start_worker("127.0.0.3")
    procs += [old, same]
    hosts, agent, warned = _attach_and_wait([old_addr, same_addr])
    try:
        assert len(warned) == 1
        text = str(warned[0].message)
        assert f"| cloudpickle | {MINE['cloudpickle']} " in text
        assert f"0.0.1 on {old_addr}" in text and f"{MINE['cloudpickle']} on {same_addr}" in text
        assert "| python" not in text and "| torch" not in text
        assert agent.host_versions()[old_addr] == dict(MINE, cloudpickle="0.0.1")
        # A warning only: the host is attached and runs procs.
        from tests.hosts.test_remote import Where

        where = hosts.spawn_procs(per_host={"gpus": 1}).spawn("where", Where)
        assert len(where.where.call().get(timeout=30)) == 2
    finally:
        hosts.shutdown().get(timeout=30)


def test_error_refuses_the_host_which_then_serves_the_next_clients(
        procs: list[subprocess.Popen[bytes]], old_cloudpickle: Path) -> None:
    proc, addr = _start_worker("127.0.0.2", old_cloudpickle)
    procs.append(proc)
    with configured(version_check="error"):
        hosts = attach_to_workers(ca=TRUST, workers=[addr])
        with pytest.raises(RuntimeError, match=f"could not attach to the host {addr}: its "
                                               "versions of cloudpickle differ") as info:
            hosts.initialized.get(timeout=45)
    assert f"0.0.1 on {addr}" in str(info.value)
    # Warnings turned into errors: initialized raises the warning itself; the host is released.
    with warnings.catch_warnings():
        warnings.simplefilter("error", VersionMismatchWarning)
        strict = attach_to_workers(ca=TRUST, workers=[addr])
        with pytest.raises(VersionMismatchWarning, match="cloudpickle"):
            strict.initialized.get(timeout=45)
    with configured(version_check="ignore"):
        again, agent, warned = _attach_and_wait([addr])  # refused, then released: serves again
    try:
        assert warned == []
        assert agent.host_versions() == {addr: dict(MINE, cloudpickle="0.0.1")}
    finally:
        again.shutdown().get(timeout=30)
    assert proc.wait(timeout=20) == 0


_LOCAL_CLUSTER = r"""
import json, warnings
from distributed import LocalCluster
from monarch.actor import hosts_from_dask
from monarch._src.hosts.versions import VersionMismatchWarning, collect
with LocalCluster(n_workers=1, processes=True, threads_per_worker=1, dashboard_address=":0",
                  worker_dashboard_address=":0") as cluster:
    hosts = hosts_from_dask(cluster)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        hosts.initialized.get(timeout=45)
    reports = list(hosts.agent.host_versions().values())
    hosts.shutdown().get(timeout=30)
warned = [str(w.message) for w in seen if issubclass(w.category, VersionMismatchWarning)]
print(json.dumps({"reports": reports, "mine": collect(), "warned": warned}))
"""


def test_dask_local_cluster_hosts_report_the_same_versions() -> None:
    out = subprocess.run([sys.executable, "-c", _LOCAL_CLUSTER], env=worker_env(), cwd=REPO,
                         capture_output=True, timeout=80)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    result = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert result["reports"] == [result["mine"]] and result["warned"] == []
