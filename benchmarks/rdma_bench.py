"""W6 of shared/PERFORMANCE.md: 64 MiB RDMABuffer read_into / write_from between two procs.

Written against the public Monarch API only (`monarch.actor`, `monarch.rdma`), so the measuring
part runs unchanged under this package and under Meta's torchmonarch.

    python benchmarks/rdma_bench.py [--quick] [--repeats N] [--rounds R]   # both, compared
    python benchmarks/rdma_bench.py --systems ours,ours_tls          # ours, plain and under TLS
    python benchmarks/rdma_bench.py --child [--quick]             # this interpreter's system only

Without `--child` it runs itself as children, from the `benchmarks/` directory (so this
checkout's `monarch/` never shadows torchmonarch's), alternating `--rounds` times (default 3)
between `.venv/bin/python` for ours and `benchmarks/.venv-torchmonarch/bin/python` for
torchmonarch; each figure is the median over rounds. It prints ONE JSON object:

    {"ours": {...}, "torchmonarch": {...},
     "ratios": {"read_vs_torchmonarch", "write_vs_torchmonarch", "tcp_read_vs_raw_socket",
                "tcp_write_vs_raw_socket"}, "targets": {...}}

Each child reports medians in GB/s (decimal): `read_GBps`, `write_GBps` (the default plane:
same-host process_vm for ours), and for ours also `tcp_read_GBps`/`tcp_write_GBps` (the TCP data
plane forced with MONARCH_RDMA_FORCE_PLANE), `raw_socket_GBps` (one plain blocking TCP socket,
recv_into a reused buffer, same procs) and `raw_process_vm_GBps` (bare process_vm_readv).
`ours_tls` is ours again with `enable_tls` on (a throw-away certificate that is its own CA):
every connection, the TCP data plane included, is then mutual TLS, and `ratios` gains
`tls_tcp_read_vs_plain`/`tls_tcp_write_vs_plain` (same rounds, alternating). It prints numbers;
it never asserts a time.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from _report import load_after, load_before

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NBYTES = 64 << 20
TIMEOUT = 120  # torchmonarch accepts only integer timeouts


def _log(msg: str) -> None:
    print(f"[rdma_bench] {msg}", file=sys.stderr, flush=True)


def _system() -> str:
    # This checkout's package is ours; any other `monarch` is torchmonarch's. (A compiled-module
    # probe does not work: ours ships a `monarch._rust_bindings` compatibility package.)
    spec = importlib.util.find_spec("monarch")
    origin = Path(spec.origin).resolve() if spec and spec.origin else None
    return "monarch-dask" if origin is not None and origin.parent.parent == REPO else "torchmonarch"


# ---- the measuring child ----------------------------------------------------------------------


def _child(repeats: int) -> dict[str, Any]:
    warnings.simplefilter("ignore")
    import torch

    from monarch.actor import Actor, endpoint, this_host
    from monarch.rdma import RDMABuffer

    class Owner(Actor):
        def __init__(self) -> None:
            self.mem = torch.ones(NBYTES, dtype=torch.uint8)

        @endpoint
        def make(self) -> Any:
            self.buf = RDMABuffer(self.mem)
            return self.buf

        @endpoint
        def where(self) -> tuple[int, int]:
            return os.getpid(), int(self.mem.data_ptr())

        @endpoint
        def raw_serve(self, reps: int) -> int:
            lsock = socket.create_server(("127.0.0.1", 0))
            view = memoryview(self.mem.numpy())

            def serve() -> None:
                conn, _ = lsock.accept()
                with conn:
                    for _ in range(reps):
                        conn.sendall(view)
                        conn.recv(1)  # the reader's "got it" keeps reps from overlapping
                lsock.close()

            threading.Thread(target=serve, daemon=True).start()
            return int(lsock.getsockname()[1])

    class Reader(Actor):
        def __init__(self) -> None:
            self.dst = torch.zeros(NBYTES, dtype=torch.uint8)

        @endpoint
        def force(self, plane: str) -> None:
            os.environ["MONARCH_RDMA_FORCE_PLANE"] = plane

        @endpoint
        def run(self, buf: Any, reps: int) -> dict[str, float]:
            buf.read_into(self.dst, timeout=TIMEOUT).get(timeout=TIMEOUT)  # warm-up
            buf.write_from(self.dst, timeout=TIMEOUT).get(timeout=TIMEOUT)
            reads, writes = [], []
            for _ in range(reps):
                t0 = time.perf_counter()
                buf.read_into(self.dst, timeout=TIMEOUT).get(timeout=TIMEOUT)
                reads.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                buf.write_from(self.dst, timeout=TIMEOUT).get(timeout=TIMEOUT)
                writes.append(time.perf_counter() - t0)
            return {"read_GBps": NBYTES / statistics.median(reads) / 1e9,
                    "write_GBps": NBYTES / statistics.median(writes) / 1e9}

        @endpoint
        def raw_socket(self, port: int, reps: int) -> float:
            view = memoryview(self.dst.numpy())
            times = []
            with socket.create_connection(("127.0.0.1", port)) as s:
                for _ in range(reps):
                    t0 = time.perf_counter()
                    got = 0
                    while got < NBYTES:
                        got += s.recv_into(view[got:], NBYTES - got)
                    times.append(time.perf_counter() - t0)
                    s.sendall(b"k")
            return NBYTES / statistics.median(times[1:] or times) / 1e9

        @endpoint
        def raw_vm(self, pid: int, addr: int, reps: int) -> float:
            class IoVec(ctypes.Structure):
                _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            local = IoVec(self.dst.data_ptr(), NBYTES)
            remote = IoVec(addr, NBYTES)
            times = []
            for _ in range(reps + 1):
                t0 = time.perf_counter()
                n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
                times.append(time.perf_counter() - t0)
                if n != NBYTES:
                    raise OSError(ctypes.get_errno(), "process_vm_readv failed")
            return NBYTES / statistics.median(times[1:]) / 1e9

    system = _system()
    out: dict[str, Any] = {"system": system, "bytes": NBYTES, "repeats": repeats}
    procs = this_host().spawn_procs(per_host={"procs": 2})
    try:
        owner = procs.slice(procs=0).spawn("w6_owner", Owner)
        reader = procs.slice(procs=1).spawn("w6_reader", Reader)
        buf = owner.make.call_one().get(timeout=TIMEOUT)
        out["backend"] = getattr(buf, "backend", None)
        out.update(reader.run.call_one(buf, repeats).get(timeout=TIMEOUT * repeats))
        pid, addr = owner.where.call_one().get(timeout=TIMEOUT)
        try:
            out["raw_process_vm_GBps"] = reader.raw_vm.call_one(pid, addr, repeats).get(
                timeout=TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - a kernel that refuses it is a result too
            out["raw_process_vm_GBps"] = f"unavailable: {exc}"
        port = owner.raw_serve.call_one(repeats + 1).get(timeout=TIMEOUT)
        out["raw_socket_GBps"] = reader.raw_socket.call_one(port, repeats + 1).get(
            timeout=TIMEOUT * repeats)
        if system == "monarch-dask":
            reader.force.call_one("tcp").get(timeout=TIMEOUT)
            tcp = reader.run.call_one(buf, repeats).get(timeout=TIMEOUT * repeats)
            out["tcp_read_GBps"], out["tcp_write_GBps"] = tcp["read_GBps"], tcp["write_GBps"]
    finally:
        procs.stop().get(timeout=TIMEOUT)
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


# ---- the comparing parent ---------------------------------------------------------------------


def _run_child(python: str, env: dict[str, str], args: list[str]) -> dict[str, Any]:
    try:
        res = subprocess.run([python, str(HERE / "rdma_bench.py"), "--child", *args], cwd=HERE,
                             env=env, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 900 s"}
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)  # type: ignore[no-any-return]
    return {"error": f"exit {res.returncode}", "stderr_tail": res.stderr[-2000:]}


def _ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        return round(a / b, 2)
    return None


def _median_of_rounds(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the median over the rounds that produced it; errors are kept as a list."""
    good = [r for r in results if "error" not in r]
    if not good:
        return results[-1]
    out: dict[str, Any] = dict(good[-1])
    for key, value in good[-1].items():
        if isinstance(value, float):
            out[key] = round(statistics.median(
                r[key] for r in good if isinstance(r.get(key), float)), 3)
    out["rounds"] = len(good)
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        out["round_errors"] = errors
    return out


def _tls_env() -> dict[str, str]:
    """The environment that turns TLS on, with a throw-away certificate (the tests' helper)."""
    import tempfile

    sys.path.insert(0, str(REPO))
    from tests.tls_certs import write_cluster_cert

    return write_cluster_cert(Path(tempfile.mkdtemp(prefix="rdma-bench-tls-")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--child", action="store_true", help="measure this interpreter's system only")
    p.add_argument("--quick", action="store_true", help="3 repeats instead of 9")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--systems", default="ours,torchmonarch",
                   help="comma-separated: ours, torchmonarch, ours_tls")
    p.add_argument("--rounds", type=int, default=3,
                   help="alternate the systems this many times; medians over rounds")
    args = p.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 9)
    if args.child:
        print(json.dumps(_child(repeats)), flush=True)
        return 0
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",
                                                            "MONARCH_RDMA_FORCE_PLANE")}
    report: dict[str, Any] = load_before()
    ours_py = REPO / ".venv" / "bin" / "python"
    peer_py = HERE / ".venv-torchmonarch" / "bin" / "python"
    flags = ["--repeats", str(repeats)]
    systems = args.systems.split(",")
    unknown = set(systems) - {"ours", "torchmonarch", "ours_tls"}
    if unknown:
        p.error(f"--systems: unknown {sorted(unknown)}; choose from ours, torchmonarch, ours_tls")
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "torchmonarch": [], "ours_tls": []}
    tls_env = _tls_env() if "ours_tls" in systems else {}
    ours_exe = str(ours_py if ours_py.exists() else sys.executable)
    # The machines are shared: alternating the systems spreads load drift over both.
    for i in range(max(1, args.rounds)):
        if "ours" in systems:
            _log(f"round {i + 1}: measuring ours")
            runs["ours"].append(_run_child(ours_exe, dict(base, PYTHONPATH=str(REPO)), flags))
        if "ours_tls" in systems:
            _log(f"round {i + 1}: measuring ours under TLS")
            runs["ours_tls"].append(_run_child(ours_exe, dict(base, PYTHONPATH=str(REPO),
                                                               **tls_env), flags))
        if "torchmonarch" in systems:
            if peer_py.exists():
                _log(f"round {i + 1}: measuring torchmonarch")
                runs["torchmonarch"].append(_run_child(str(peer_py), base, flags))
            else:
                runs["torchmonarch"].append({"error": f"{peer_py} does not exist"})
    for system, results in runs.items():
        if results:
            report[system] = _median_of_rounds(results)
    ours, tm = report.get("ours", {}), report.get("torchmonarch", {})
    tls = report.get("ours_tls", {})
    report["ratios"] = {
        "tls_tcp_read_vs_plain": _ratio(tls.get("tcp_read_GBps"), ours.get("tcp_read_GBps")),
        "tls_tcp_write_vs_plain": _ratio(tls.get("tcp_write_GBps"), ours.get("tcp_write_GBps")),
        "read_vs_torchmonarch": _ratio(ours.get("read_GBps"), tm.get("read_GBps")),
        "write_vs_torchmonarch": _ratio(ours.get("write_GBps"), tm.get("write_GBps")),
        "tcp_read_vs_raw_socket": _ratio(ours.get("tcp_read_GBps"), ours.get("raw_socket_GBps")),
        "tcp_write_vs_raw_socket": _ratio(ours.get("tcp_write_GBps"),
                                          ours.get("raw_socket_GBps")),
        "read_vs_raw_process_vm": _ratio(ours.get("read_GBps"), ours.get("raw_process_vm_GBps")),
        # Each system against the bare process_vm_readv measured in its own run: cancels the
        # machine's load drift between the two systems' runs.
        "read_vs_torchmonarch_load_normalized": _ratio(
            _ratio(ours.get("read_GBps"), ours.get("raw_process_vm_GBps")),
            _ratio(tm.get("read_GBps"), tm.get("raw_process_vm_GBps"))),
        "write_vs_torchmonarch_load_normalized": _ratio(
            _ratio(ours.get("write_GBps"), ours.get("raw_process_vm_GBps")),
            _ratio(tm.get("write_GBps"), tm.get("raw_process_vm_GBps"))),
    }
    r = report["ratios"]

    def met(value: Any, target: float) -> bool | None:
        return None if value is None else value >= target

    report["targets"] = {
        "same_host_vs_torchmonarch_>=5x": {"read": met(r["read_vs_torchmonarch"], 5.0),
                                           "write": met(r["write_vs_torchmonarch"], 5.0)},
        "same_host_>=3GBps": {"read": met(ours.get("read_GBps"), 3.0),
                              "write": met(ours.get("write_GBps"), 3.0)},
        "tcp_vs_raw_socket_>=0.6": {"read": met(r["tcp_read_vs_raw_socket"], 0.6),
                                    "write": met(r["tcp_write_vs_raw_socket"], 0.6)},
    }
    report.update(load_after())
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
