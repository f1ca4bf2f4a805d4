"""A real Prometheus (Debian's package) on loopback for the tests: it scrapes the given
`/metrics` URL every second; `query(expr)` asks its HTTP API, `poll(expr, deadline)` waits for
an answer."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from monarch._src.hosts.addresses import free_port

Query = Callable[[str], list[Any]]


@contextlib.contextmanager
def prometheus_scraping(metrics_url: str) -> Iterator[Query]:
    """Prometheus scraping `metrics_url` (skips the test when the binary is missing)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("Debian's prometheus is not installed (the Makefile's set-up installs it)")
    parts = urllib.parse.urlsplit(metrics_url)
    workdir = Path(tempfile.mkdtemp(prefix="prom"))
    (workdir / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: monarch\n    metrics_path: {parts.path or '/metrics'}\n"
        f"    static_configs:\n      - targets: ['{parts.netloc}']\n")
    port = free_port("127.0.0.1")

    def query(expr: str) -> list[Any]:
        api = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(api, timeout=5) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    with open(workdir / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [binary, f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            yield query
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    shutil.rmtree(workdir, ignore_errors=True)


def poll(query: Query, expr: str, deadline: float) -> list[Any]:
    """Prometheus' answer to `expr` once it has one (it scrapes every second)."""
    while True:
        try:
            found = query(expr)
        except (urllib.error.URLError, ConnectionError):
            found = []  # not listening yet
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)  # an outside server's scrape: nothing to wait on but its API
