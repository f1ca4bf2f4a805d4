"""attach(addr): the client bootstraps through a worker host, before any other monarch call.

Each case runs in a process of its own, since attach must precede the client's start.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.hosts.conftest import REPO, end_processes, worker_env

pytestmark = pytest.mark.timeout(120)

_WORKER = ("import sys; from monarch.actor import run_worker_loop_forever; "
           "run_worker_loop_forever(address=sys.argv[1], ca='trust_all_connections')")


def _client(program: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(program), *args],
                         env=worker_env(), cwd=REPO, capture_output=True, text=True, timeout=100)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out.stdout


def _worker(addr: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _WORKER, addr], env=worker_env(), cwd=REPO,
                            stdin=subprocess.DEVNULL)


def test_attached_client_never_dials_the_workers_address_again(tmp_path: Any) -> None:
    addr = f"ipc://{tmp_path}/host0"
    worker = _worker(addr)
    try:
        out = _client("""
            import os, sys
            from monarch.actor import Actor, attach, attach_to_workers, endpoint, this_host
            from monarch._src.hosts.gateway import attached_to

            class Echo(Actor):
                @endpoint
                def echo(self, m: str) -> str:
                    return m

            addr = sys.argv[1]
            attach(addr)
            attach(addr)  # the same attachment again: nothing happens
            print("attached", attached_to() == addr)
            hosts = attach_to_workers(ca="trust_all_connections", workers=[addr])
            os.remove(addr[len("ipc://"):])  # nobody can dial the worker's address any more
            procs = hosts.spawn_procs(per_host={"workers": 2})
            print("remote", sorted(procs.spawn("e", Echo).echo.call("hi").get(timeout=60)
                                   .values()))
            local = this_host().spawn_procs()  # this_host() is still this machine
            print("local", local.spawn("e", Echo).echo.call_one("here").get(timeout=60))
            try:
                attach("ipc:///tmp/another")
            except RuntimeError as e:
                print("other:", e)
            hosts.shutdown().get(timeout=30)
        """, addr)
        assert "attached True" in out
        assert "remote ['hi', 'hi']" in out
        assert "local here" in out
        assert f"other: client is already attached through {addr}, not ipc:///tmp/another" in out
    finally:
        end_processes([worker])  # type: ignore[list-item]


def test_attach_after_the_client_started_is_refused() -> None:
    out = _client("""
        from monarch.actor import attach, this_proc
        this_proc()
        try:
            attach("ipc:///tmp/nothing-here")
        except RuntimeError as e:
            print(e)
    """)
    assert "client was initialized without a remote attachment; call attach(addr) before the " \
           "first context()/this_host()/this_proc()" in out


def test_attach_to_nothing_says_so(tmp_path: Any) -> None:
    out = _client("""
        import sys
        from monarch.config import configure
        from monarch.actor import attach
        configure(host_heartbeat_timeout="1s")
        try:
            attach(sys.argv[1])
        except RuntimeError as e:
            print(e)
        try:
            attach("udp://x:1")
        except ValueError as e:
            print(e)
    """, f"ipc://{tmp_path}/nobody")
    assert "no monarch host answered there" in out
    assert "uses the scheme 'udp'" in out
