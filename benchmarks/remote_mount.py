"""A real venv on a host: remote-mounted (`remote_mount`) against copied (`sync_workspace`).

Prints one JSON report; asserts nothing. Its load is `_report`'s `load_avg_1m_before`/
`load_avg_1m_after` (reports before it had `load: {before, after}`, each the 1, 5 and 15-minute
averages). Run from the repository root:

    .venv/bin/python benchmarks/remote_mount.py [--source .venv] [--module torch]

One ProcessJob host (a process on this machine, reached over loopback). For each way of getting
`--source` (by default this repository's .venv, torch included) to the host, cold then warm:

* mount: `remotemount(...).open()` with an empty host chunk cache (cold), then closed and opened
  again on the same cache (warm: a second mount of the unchanged tree);
* copy: `sync_workspace` into an empty directory (cold), then again (warm: nothing changed);

then a proc started with the venv's interpreter there imports `--module`. Reported per run: the
seconds to make the venv available, to start the proc and import the module in it, the total,
and the bytes moved (fetched by the mount's hosts; the size of the files the copy sent).
`proc_and_import_s` runs from `spawn_procs` to the import's end (`import_s`, the import
alone, measured in the proc). The
ratios (mount / copy) compare runs of this same invocation; `load` is the machine's load
average before and after (other programs share this machine's cores).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from _report import load_after, load_before

from monarch._src.job.process import ProcessJob
from monarch._src.job.workspace import sync_workspace
from monarch.actor import Actor, endpoint
from monarch.remotemount import remotemount


class Importer(Actor):
    @endpoint
    def load(self, module: str) -> dict[str, Any]:
        start = time.perf_counter()
        mod = __import__(module)
        return {"import_s": time.perf_counter() - start, "prefix": sys.prefix,
                "file": getattr(mod, "__file__", None)}


def _import_there(hosts: Any, python: str, module: str) -> dict[str, Any]:
    start = time.perf_counter()
    procs = hosts.with_python_executable(python).spawn_procs(name="importer")
    importer = procs.spawn("importer", Importer)
    got = importer.load.call_one(module).get()
    took = time.perf_counter() - start
    procs.stop().get()
    return {"proc_and_import_s": round(took, 3), "import_s": round(got["import_s"], 3),
            "prefix": got["prefix"], "module_file": got["file"]}


def _sent_bytes(source: str, report: Any) -> int:
    total = 0
    for paths in report.sent.values():
        for rel in paths:
            try:
                total += os.lstat(os.path.join(source, rel)).st_size
            except OSError:
                continue  # removed since: not counted
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=".venv")
    parser.add_argument("--module", default="torch")
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    python_rel = "bin/python"
    work = tempfile.mkdtemp(prefix="monarch-bench-mount-")
    before_load = load_before()
    runs: dict[str, dict[str, Any]] = {}
    job = ProcessJob({"hosts": 1})
    try:
        hosts = job.state(cached_path=None).hosts
        mnt, cache = os.path.join(work, "mnt"), os.path.join(work, "cache")
        mount = remotemount(hosts, source, mnt, cache_dir=cache)
        for run in ("mount_cold", "mount_warm"):
            start = time.perf_counter()
            mount.open()
            ready = time.perf_counter() - start
            result = _import_there(hosts, os.path.join(mnt, python_rel), args.module)
            result.update(available_s=round(ready, 3), bytes_moved=mount.stats()["fetched_bytes"])
            mount.close()
            runs[run] = result
        dest = os.path.join(work, "copy")
        for run in ("copy_cold", "copy_warm"):
            start = time.perf_counter()
            report = sync_workspace(hosts, source, dest)
            ready = time.perf_counter() - start
            result = _import_there(hosts, os.path.join(dest, python_rel), args.module)
            result.update(available_s=round(ready, 3), bytes_moved=_sent_bytes(source, report))
            runs[run] = result
    finally:
        job.kill()
        shutil.rmtree(work, ignore_errors=True)
    for result in runs.values():
        result["total_s"] = round(result["available_s"] + result["proc_and_import_s"], 3)

    def ratio(a: str, b: str, key: str) -> float | None:
        return round(runs[a][key] / runs[b][key], 3) if runs[b][key] else None

    source_bytes = sum(os.lstat(os.path.join(d, f)).st_size
                       for d, _, files in os.walk(source) for f in files)
    print(json.dumps({
        "benchmark": "remote_mount", "source": source, "source_bytes": source_bytes,
        "module": args.module, "hosts": 1, "cpus": os.cpu_count(),
        **before_load, **load_after(),
        "runs": runs,
        "ratios_mount_over_copy": {
            "cold_total": ratio("mount_cold", "copy_cold", "total_s"),
            "warm_total": ratio("mount_warm", "copy_warm", "total_s"),
            "cold_bytes": ratio("mount_cold", "copy_cold", "bytes_moved"),
        },
    }, indent=2))


if __name__ == "__main__":
    main()
