"""Network namespaces joined by veth pairs and a bridge: two (or more) "machines" on one box.

A bridge in the root namespace holds the gateway address (10.a.b.1), where a controller can
listen; each namespace gets 10.a.b.(i+2) on the inner end of a veth pair whose outer end is on
the bridge. Used by tests/hosts/test_netns.py and benchmarks/chaos_soak.py (which puts the repo
root on sys.path to import it). Stdlib only, so a benchmark can import it without pytest. Needs
root and iproute2: `cannot_make_namespaces()` says why not, or None.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from typing import IO, Any


def ip(*args: str) -> None:
    """Run `ip ARGS...`; raises CalledProcessError (with its stderr) when it fails."""
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def cannot_make_namespaces() -> str | None:
    """Why namespaces cannot be made here (not root, no `ip`), or None when they can."""
    if os.geteuid() != 0:
        return f"network namespaces need root (running as uid {os.geteuid()})"
    if shutil.which("ip") is None:
        return "iproute2's `ip` command is not installed"
    return None


class Namespaces:
    """A bridge in the root namespace and one namespace per host, with veth pairs."""

    def __init__(self, n: int) -> None:
        tag = f"{os.getpid() % 4096:03x}{random.randrange(4096):03x}"
        net = f"10.{random.randrange(100, 250)}.{random.randrange(1, 250)}"
        self.bridge = f"mb{tag}"
        self.gateway = f"{net}.1"
        self.names = [f"mh{tag}{chr(97 + i)}" for i in range(n)]
        self.links = [f"mv{tag}{chr(97 + i)}" for i in range(n)]  # outer ends, on the bridge
        self.inner = [f"{link}p" for link in self.links]  # inner ends, in the namespaces
        self.ips = [f"{net}.{i + 2}" for i in range(n)]
        self.created: list[tuple[str, str]] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        self.created.append(("link", self.bridge))
        ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for ns, link, inner, addr in zip(self.names, self.links, self.inner, self.ips):
            ip("netns", "add", ns)
            self.created.append(("netns", ns))
            ip("link", "add", link, "type", "veth", "peer", "name", inner)
            self.created.append(("link", link))
            ip("link", "set", inner, "netns", ns)
            ip("link", "set", link, "master", self.bridge)
            ip("link", "set", link, "up")
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", inner)
            ip("-n", ns, "link", "set", inner, "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "route", "add", "default", "via", self.gateway)

    def popen(self, i: int, argv: list[str], env: dict[str, str], cwd: str,
              stderr: int | IO[Any] | None = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        """Start `argv` inside namespace `i` (`ip netns exec` execs it: the pid is argv's)."""
        return subprocess.Popen(["ip", "netns", "exec", self.names[i], *argv], env=env,
                                stdin=subprocess.DEVNULL, stderr=stderr, cwd=cwd)

    def pids(self, i: int) -> list[int]:
        """Pids of the processes living in namespace `i` (`ip netns pids`)."""
        out = subprocess.run(["ip", "netns", "pids", self.names[i]], check=True,
                             capture_output=True, timeout=10).stdout
        return [int(p) for p in out.split()]

    def close(self) -> None:
        """Delete what was created, last first; best effort (a name already gone is fine)."""
        for kind, name in reversed(self.created):
            subprocess.run(["ip", kind, "del", name], capture_output=True, timeout=10)
        self.created.clear()


def wait_listening(proc: subprocess.Popen[bytes], host: str, port: int,
                   timeout: float = 30.0) -> None:
    """Poll (bounded) until `host:port` accepts connections; fail if `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker for {host}:{port} exited with {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"worker for {host}:{port} did not listen within {timeout}s")
