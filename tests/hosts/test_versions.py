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
from monarch.actor import attach_to_workers
from monarch.config import configure, configured
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
from tests.hosts.conftest import REPO, end_processes, free_port, wait_listening, worker_env

pytestmark = pytest.mark.timeout(90)

TRUST = "trust_all_connections"
MINE = collect()
A, B, C = "tcp://10.0.0.2:26600", "tcp://10.0.0.3:26600", "tcp://10.0.0.4:26600"


# ---- what a process reports ----------------------------------------------------------------
def test_collect_reports_this_interpreter_and_installed_distributions() -> None:
    assert MINE["python"] == "%d.%d.%d" % sys.version_info[:3]
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
