"""Under `enable_tls` the RDMA TCP data plane is mutual TLS too: transfers move the right bytes,
and a peer without a certificate of the CA gets nothing, even with a valid buffer token."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

pytest.importorskip("cryptography")

from tests.tls_certs import write_cluster_cert  # noqa: E402  (after the importorskip)

REPO = Path(__file__).resolve().parents[2]

_CLIENT = textwrap.dedent("""
    import socket, struct, warnings
    import torch
    warnings.simplefilter("ignore")
    from monarch.actor import this_host
    from tests.rdma.actors import Owner, Peer

    procs = this_host().spawn_procs(per_host={"procs": 2})
    owner = procs.spawn("owner", Owner, 4096)
    peer = procs.spawn("peer", Peer)
    peer.slice(procs=1).force.call_one("tcp").get(timeout=60)
    buf = owner.slice(procs=0).make.call_one().get(timeout=60)
    values, plane = peer.slice(procs=1).read.call_one(buf).get(timeout=60)
    print("READ", plane, values[:4] == [0, 1, 2, 3], len(values), flush=True)
    peer.slice(procs=1).write.call_one(buf, [9] * 4096).get(timeout=60)
    print("WRITTEN", owner.slice(procs=0).head.call_one(3).get(timeout=60), flush=True)

    # A stranger who knows the handle (endpoint, id, token) but has no certificate.
    h = buf._handle
    host, port = h.tcp
    with socket.create_connection((host, port), timeout=30) as raw:
        raw.sendall(struct.pack("!BQQQQ", 1, h.buffer_id, h.token, 0, 16))
        got = b""
        try:
            while True:
                chunk = raw.recv(4096)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
    print("STRANGER", len(got), bytes(16) in got or bytes([9]) * 16 in got, flush=True)
    procs.stop().get(timeout=60)
""")


def test_data_plane_speaks_tls_and_refuses_strangers(tmp_path: Path) -> None:
    env = {**os.environ, **write_cluster_cert(tmp_path),
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", _CLIENT], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "READ tcp True 4096" in lines
    assert "WRITTEN [9, 9, 9]" in lines
    stranger = next(line for line in lines if line.startswith("STRANGER"))
    assert stranger.split()[2] == "False", stranger  # none of the buffer's bytes came back
    assert "refused an RDMA data-plane connection" in done.stderr
