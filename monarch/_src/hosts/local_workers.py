"""`monarch worker` subprocesses on this machine, ended with the process that started them.

They are the stand-in cluster of `hosts_from_config` without a configured scheduler, and the
host of a Dask worker that lives inside a process already running monarch (`hosts/dask.py`).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
from typing import Any

from monarch._src.config import duration_seconds, get as config_get
from monarch._src.hosts.addresses import free_port, parse_worker_address, probe_ssl_context

__all__ = ["LocalWorkers"]


class LocalWorkers:
    """`monarch worker` subprocesses on this machine, ended with this process (the stand-in
    behind `hosts_from_config`, and the host of a Dask worker living in a monarch client)."""

    def __init__(self, n: int, host: str = "127.0.0.1") -> None:
        import subprocess

        self.procs: list[subprocess.Popen[bytes]] = []
        self.addresses: list[str] = []
        for _ in range(n):
            addr = f"tcp://{host}:{free_port(host)}"  # the worker binds it right away
            env = dict(os.environ, MONARCH_PRESTART="0", **_tls_env())
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "monarch._src.hosts.worker_cli", "--address", addr,
                 "--exit-with-parent"],
                env=env, stdin=subprocess.DEVNULL,
            ))
            self.addresses.append(addr)

    def futures(self) -> list[concurrent.futures.Future[str]]:
        """One future per worker: its address once it accepts connections."""
        out = []
        for proc, addr in zip(self.procs, self.addresses):
            fut: concurrent.futures.Future[str] = concurrent.futures.Future()
            threading.Thread(target=_wait_listening, args=(proc, addr, fut),
                             name="monarch-wait-worker", daemon=True).start()
            out.append(fut)
        return out

    def close(self) -> None:
        """End the workers (SIGTERM, then SIGKILL after 5 s)."""
        import subprocess

        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def _tls_env() -> dict[str, str]:
    """The TLS settings of this process, however they were set, for a worker subprocess."""
    if not config_get("enable_tls"):
        return {}
    return {
        "MONARCH_ENABLE_TLS": "1",
        "MONARCH_TLS_CA_FILE": str(config_get("tls_ca_file")),
        "MONARCH_TLS_CERT_FILE": str(config_get("tls_cert_file")),
        "MONARCH_TLS_KEY_FILE": str(config_get("tls_key_file")),
    }


def _wait_listening(proc: Any, addr: str, fut: concurrent.futures.Future[str]) -> None:
    """Poll (bounded) until the worker at `addr` accepts a TCP connection."""
    import socket
    import time

    _, host, port = parse_worker_address(addr)
    ssl_context = probe_ssl_context()
    deadline = time.monotonic() + duration_seconds("host_spawn_ready_timeout")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fut.set_exception(RuntimeError(
                f"the local worker for {addr} exited with status {proc.returncode}"))
            return
        try:
            with socket.create_connection((host, port), timeout=1) as sock:
                if ssl_context is not None:  # a bare TCP probe would be logged as an attack
                    ssl_context.wrap_socket(sock).close()
                fut.set_result(addr)
                return
        except OSError:
            time.sleep(0.05)
    fut.set_exception(RuntimeError(f"the local worker for {addr} did not start listening"))
