"""Remote hosts under mutual TLS: the same `tcp://` worker addresses, every connection TLS.

The controller runs in a subprocess with the `MONARCH_ENABLE_TLS`/`MONARCH_TLS_*` environment:
`hosts_from_config`'s two local workers inherit it, are attached, spawn procs, and every
address involved (hosts and procs) is `tls://`. A worker given a `tls://` address while TLS is
off is refused with a clear error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from tests.tls_certs import write_cluster_cert  # (after the importorskip)

pytestmark = pytest.mark.timeout(150)

_CONTROLLER = textwrap.dedent(
    """
    import os
    from monarch.actor import Actor, endpoint, hosts_from_config

    class Where(Actor):
        @endpoint
        def pid(self):
            return os.getpid()

    hosts = hosts_from_config("MONARCH_TEST_NO_SCHEDULER")
    hosts.initialized.get(timeout=60)
    procs = hosts.spawn_procs(per_host={"gpus": 2})
    pids = procs.spawn("where", Where).pid.call().get(timeout=60)
    print("PIDS", len(set(pids.values())), flush=True)
    print("HOSTS", *[h.addr for h in hosts._agent.hosts], flush=True)
    print("PROCS", *procs._table.keys, flush=True)
    hosts.shutdown().get(timeout=30)
    """
)


def test_hosts_attach_and_procs_talk_over_tls(tmp_path: Path) -> None:
    env = {**os.environ, **write_cluster_cert(tmp_path), "MONARCH_PRESTART": "0"}
    env.pop("MONARCH_TEST_NO_SCHEDULER", None)
    proc = subprocess.run([sys.executable, "-c", _CONTROLLER], env=env, capture_output=True,
                          text=True, timeout=140, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line}
    assert lines["PIDS"] == ["4"]
    assert len(lines["HOSTS"]) == 2 and len(lines["PROCS"]) == 4
    assert all(a.startswith("tls://") for a in lines["HOSTS"] + lines["PROCS"])
    # The probes complete a TLS handshake: no listener logs a failed one.
    assert "TLS handshake failed" not in proc.stderr


def test_tls_worker_address_without_tls_is_refused() -> None:
    from monarch._src.hosts.addresses import parse_worker_address

    with pytest.raises(ValueError, match="enable_tls is off"):
        parse_worker_address("tls://10.0.0.5:26600")
