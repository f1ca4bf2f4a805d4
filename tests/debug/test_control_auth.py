"""The control server answers only requests that carry its token, and speaks TLS under
`enable_tls`: whoever can reach its port cannot drive a debugger or read the mesh without it."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from monarch._src.admin.client import Server, request
from tests.debug.cli_helpers import cli, server_address, start_app, stop, wait_until

pytestmark = [pytest.mark.timeout(120)]


def _raw(server: Server, line: bytes) -> bytes:
    """Send one request line over plain TCP; everything the server sends back before closing."""
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(line)
        chunks = []
        while True:
            try:
                chunk = sock.recv(4096)
            except ConnectionResetError:  # a TLS server resets a plain-text peer
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def _serve(tmp_path: Path, extra_env: dict[str, str] | None = None) -> tuple[Any, Server]:
    app = start_app("serve", tmp_path, extra_env)
    server = server_address(tmp_path, app)
    wait_until(lambda: app.stdout.readline().startswith("READY"), "READY")
    return app, server


def _finish(app: Any) -> str:
    """Release the app, let it exit, and return its stderr."""
    app.stdin.write("go\n")
    app.stdin.flush()
    wait_until(lambda: app.poll() is not None, "the client to exit")
    out, err = stop(app)
    assert "DONE True" in out
    return err


def test_requests_without_the_token_get_nothing_and_are_logged(tmp_path: Path) -> None:
    app, server = _serve(tmp_path)
    try:
        published = tmp_path / ".monarch" / f"controller-{app.pid}.json"
        assert stat.S_IMODE(published.stat().st_mode) == 0o600
        assert len(server.token) == 64 and not server.tls
        snapshot = json.dumps({"op": "snapshot"}).encode() + b"\n"
        assert _raw(server, snapshot) == b""
        wrong = json.dumps({"op": "snapshot", "token": "0" * 64}).encode() + b"\n"
        assert _raw(server, wrong) == b""
        assert _raw(server, b"not json\n") == b""
        # With the token the same request is answered.
        assert "hosts" in request(server, {"op": "snapshot"})["snapshot"]
    finally:
        err = _finish(app)
    assert err.count("refused a control connection from ('127.0.0.1'") == 3, err


def test_cli_elsewhere_needs_the_token(tmp_path: Path) -> None:
    app, server = _serve(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        port = str(server.port)
        refused = cli(["monarch.tools.commands.top", "--once", "--port", port], elsewhere)
        assert refused.returncode == 1
        assert "answers only requests that carry its token" in refused.stderr
        assert "MONARCH_CONTROL_TOKEN" in refused.stderr
        wrong = cli(["monarch.tools.commands.top", "--once", "--port", port], elsewhere,
                    extra_env={"MONARCH_CONTROL_TOKEN": "f" * 64})
        assert "the token is not the one it expects" in wrong.stderr
        allowed = cli(["monarch.tools.commands.top", "--once", "--port", port], elsewhere,
                      extra_env={"MONARCH_CONTROL_TOKEN": server.token})
        assert allowed.returncode == 0, allowed.stderr
        assert "PROCS (2)" in allowed.stdout
    finally:
        _finish(app)


def test_control_server_speaks_tls_under_enable_tls(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from tests.tls_certs import write_cluster_cert

    certs = tmp_path / "certs"
    certs.mkdir()
    tls_env = write_cluster_cert(certs)
    app, server = _serve(tmp_path, tls_env)
    try:
        assert server.tls
        # Plain text, even with the right token, gets nothing: the TLS handshake fails first.
        line = json.dumps({"op": "snapshot", "token": server.token}).encode() + b"\n"
        assert b"snapshot" not in _raw(server, line)
        top = cli(["monarch.tools.commands.top", "--once"], tmp_path, extra_env=tls_env)
        assert top.returncode == 0, top.stderr
        assert "PROCS (2)" in top.stdout
        # Without the certificates the CLI cannot talk to it, and says why.
        no_certs = {**tls_env, "MONARCH_TLS_CERT_FILE": "", "MONARCH_TLS_KEY_FILE": ""}
        no_certs.pop("MONARCH_ENABLE_TLS")
        refused = cli(["monarch.tools.commands.top", "--once"], tmp_path, extra_env=no_certs)
        assert refused.returncode == 1
        assert "tls_cert_file and tls_key_file are not set" in refused.stderr
    finally:
        _finish(app)
