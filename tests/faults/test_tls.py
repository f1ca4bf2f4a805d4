"""Mutual TLS, switched on by configuration: procs talk over tls://, strangers are refused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

cryptography = pytest.importorskip("cryptography")

from tests.tls_certs import write_cluster_cert  # noqa: E402  (after the importorskip)

_CLIENT = textwrap.dedent(
    """
    import os, socket, ssl
    from monarch.actor import Actor, endpoint, this_host
    from monarch._src.runtime.runtime import get_runtime

    class Where(Actor):
        @endpoint
        def pid(self):
            return os.getpid()

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    where = procs.spawn("where", Where)
    pids = list(where.pid.call().get(timeout=60).values())
    print("PIDS", len(set(pids)), flush=True)
    print("ADDRS", get_runtime().address, *procs._table.keys, flush=True)

    host, port = procs._table.keys[0].split("://")[1].rsplit(":", 1)
    # A stranger with no certificate: plain TLS, then plain TCP.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    outcome = "REFUSED"
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(b"hello" * 100)
                if tls.recv(16):
                    outcome = "ANSWERED"
    except (OSError, ssl.SSLError):
        pass
    print("STRANGER_TLS", outcome, flush=True)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(os.urandom(512))
    print("AFTER", len(where.pid.call().get(timeout=60)), flush=True)
    procs.stop().get(timeout=60)
    print("DONE", flush=True)
    """
)


def test_tls_configured_procs_use_tls_and_refuse_strangers(tmp_path: Path) -> None:
    env = {**os.environ, **write_cluster_cert(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", _CLIENT], env=env, capture_output=True, text=True, timeout=100
    )
    out = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PIDS 2" in out
    addrs = next(line for line in out.splitlines() if line.startswith("ADDRS")).split()[1:]
    assert len(addrs) == 3 and all(a.startswith("tls://") for a in addrs), addrs
    assert "STRANGER_TLS REFUSED" in out
    assert "TLS handshake failed" in result.stderr  # the refusal is logged by the proc
    assert "AFTER 2" in out and "DONE" in out


def test_tls_enabled_without_certificates_is_a_clear_error() -> None:
    env = {**os.environ, "MONARCH_ENABLE_TLS": "1"}
    for key in ("MONARCH_TLS_CA_FILE", "MONARCH_TLS_CERT_FILE", "MONARCH_TLS_KEY_FILE"):
        env.pop(key, None)
    script = "from monarch.actor import this_proc\nthis_proc()\n"
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=100
    )
    assert result.returncode != 0
    assert ("TLS is on (enable_tls, or the Tls transport) but tls_ca_file, tls_cert_file "
            "and tls_key_file are not set") in result.stderr
