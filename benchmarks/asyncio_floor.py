"""The floor: plain asyncio TCP on loopback with pickle protocol 5, and no actor runtime at all.

It answers "how far from the floor" for workloads W1-W5 of shared/PERFORMANCE.md: client and
servers are separate OS processes talking over one TCP connection each, with request ids,
length-prefixed frames, pickle protocol 5 and out-of-band buffers (large frames are received in
place, straight into the buffer the result is unpickled from). W4 fans out to four server
processes. A second baseline, a raw blocking socket receiving into one reused buffer, gives the
W5 ceiling ("raw_socket_GBps") and a ping figure ("raw_socket_p50_us").

    python benchmarks/asyncio_floor.py [--only W1,...] [--quick]

prints one JSON object shaped like workloads.py's, with "system": "asyncio-floor".
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import pickle
import platform
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import percentile

ALL_WORKLOADS = ("W1", "W2", "W3", "W4", "W5")
COUNTS: dict[str, tuple[int, int]] = {
    "w1_samples": (5, 2),
    "w2_warmup": (200, 20),
    "w2_calls": (2_000, 200),
    "w3_calls": (10_000, 1_000),
    "w3_repeats": (3, 1),
    "w4_warmup": (50, 5),
    "w4_calls": (500, 50),
    "w5_repeats": (5, 2),
}
W5_BYTES = 64 << 20

# Wire format of one message: HEADER (request id, frame count), then one u64 length per frame,
# then the frames. Frame 0 is the pickle stream; the others are its out-of-band buffers.
HEADER = struct.Struct("!QI")
U64 = struct.Struct("!Q")
# Frames at least this large are received in place instead of through the scratch buffer.
DIRECT_THRESHOLD = 1 << 16
SCRATCH_BYTES = 1 << 18


def _log(msg: str) -> None:
    print(f"[floor] {msg}", file=sys.stderr, flush=True)


def _latency_summary(samples_ns: list[int]) -> dict[str, Any]:
    us = sorted(s / 1_000.0 for s in samples_ns)
    return {
        "p50_us": round(percentile(us, 0.5), 1),
        "p99_us": round(percentile(us, 0.99), 1),
        "mean_us": round(statistics.fmean(us), 1),
        "n": len(us),
    }


# --------------------------------------------------------------------------------------------
# Framing shared by client and server.


def send_message(transport: asyncio.WriteTransport, request_id: int, obj: Any) -> None:
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [buf.raw() for buf in buffers]
    lengths = [len(stream), *(raw.nbytes for raw in raws)]
    head = HEADER.pack(request_id, len(lengths)) + struct.pack(f"!{len(lengths)}Q", *lengths)
    transport.write(head + stream)
    # Written one by one: Python 3.11's writelines() would join (copy) them first.
    for raw in raws:
        transport.write(raw)


class FramedProtocol(asyncio.BufferedProtocol):
    """Parses messages from a byte stream and hands each one to `on_message`.

    Small frames pass through a scratch buffer (many messages per recv); a frame of at least
    DIRECT_THRESHOLD bytes gets its own bytearray, which the socket then fills in place.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        # Scratch bytes not parsed yet are _scratch[_start:_end]. Never resized (asyncio may
        # still hold a view of it while buffer_updated runs); replaced when it must grow.
        self._scratch = bytearray(SCRATCH_BYTES)
        self._start = 0
        self._end = 0
        # The message being parsed: frame count 0 means "waiting for a header"; lengths None
        # means "waiting for the length table".
        self._request_id = 0
        self._frame_count = 0
        self._lengths: list[int] | None = None
        self._frames: list[bytearray] = []
        # A large frame being received in place, and how many of its bytes have arrived.
        self._direct: bytearray | None = None
        self._direct_pos = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def on_message(self, request_id: int, frames: list[bytearray]) -> None:
        raise NotImplementedError

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._direct is not None:
            return memoryview(self._direct)[self._direct_pos :]
        if self._end == len(self._scratch):
            pending = self._end - self._start
            if pending == len(self._scratch):
                grown = bytearray(2 * len(self._scratch))
                grown[:pending] = self._scratch
                self._scratch = grown
            else:
                self._scratch[:pending] = self._scratch[self._start : self._end]
            self._start, self._end = 0, pending
        return memoryview(self._scratch)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._direct is not None:
            self._direct_pos += nbytes
            if self._direct_pos == len(self._direct):
                frame, self._direct = self._direct, None
                self._frame_done(frame)
            return
        self._end += nbytes
        self._parse()

    def _frame_done(self, frame: bytearray) -> None:
        self._frames.append(frame)
        assert self._lengths is not None
        if len(self._frames) == len(self._lengths):
            frames, self._frames = self._frames, []
            self._frame_count, self._lengths = 0, None
            self.on_message(self._request_id, frames)

    def _parse(self) -> None:
        buf = self._scratch
        while True:
            available = self._end - self._start
            if self._frame_count == 0:
                if available < HEADER.size:
                    return
                self._request_id, self._frame_count = HEADER.unpack_from(buf, self._start)
                self._start += HEADER.size
            elif self._lengths is None:
                need = U64.size * self._frame_count
                if available < need:
                    return
                self._lengths = list(struct.unpack_from(f"!{self._frame_count}Q", buf, self._start))
                self._start += need
            else:
                size = self._lengths[len(self._frames)]
                if available >= size:
                    frame = buf[self._start : self._start + size]
                    self._start += size
                    self._frame_done(frame)
                elif size >= DIRECT_THRESHOLD:
                    frame = bytearray(size)
                    frame[:available] = buf[self._start : self._end]
                    self._start = self._end = 0
                    self._direct, self._direct_pos = frame, available
                    return
                else:
                    return


def _loads(frames: list[bytearray]) -> Any:
    return pickle.loads(frames[0], buffers=frames[1:])


# --------------------------------------------------------------------------------------------
# Servers (run as `asyncio_floor.py --serve` / `--raw-serve` in their own processes).


class ServerProtocol(FramedProtocol):
    def on_message(self, request_id: int, frames: list[bytearray]) -> None:
        method, args = _loads(frames)
        if method == "noop":
            result: Any = args[0]
        elif method == "length":
            result = len(args[0])
        else:
            result = RuntimeError(f"Unknown method {method!r}.")
        assert self.transport is not None
        send_message(self.transport, request_id, result)


def _exit_when_parent_goes() -> None:
    # The parent holds our stdin; EOF means it finished or died, so no server outlives a run.
    def watch() -> None:
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _serve() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(ServerProtocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        await server.serve_forever()

    _exit_when_parent_goes()
    asyncio.run(main())


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("Peer closed the raw socket.")
        got += n


def _raw_serve() -> None:
    _exit_when_parent_goes()
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = bytearray(U64.size)
    buf = bytearray(W5_BYTES)  # reused for every message
    while True:
        try:
            _recv_exact(conn, memoryview(head))
        except ConnectionError:
            return
        (size,) = U64.unpack(head)
        if size > len(buf):
            buf = bytearray(size)
        _recv_exact(conn, memoryview(buf)[:size])
        conn.sendall(U64.pack(size))


def _spawn_server(mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _read_port(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip():
        proc.kill()
        raise RuntimeError(f"Server process {proc.pid} exited before printing its port.")
    return int(line)


def _start_servers(mode: str, count: int) -> list[tuple[subprocess.Popen[str], int]]:
    # All are started before any port is read, so they boot in parallel.
    procs = [_spawn_server(mode) for _ in range(count)]
    return [(proc, _read_port(proc)) for proc in procs]


def _stop_server(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------------------------
# Client.


class ClientProtocol(FramedProtocol):
    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count()
        self._pending: dict[int, asyncio.Future[Any]] = {}

    def on_message(self, request_id: int, frames: list[bytearray]) -> None:
        self._pending.pop(request_id).set_result(_loads(frames))

    def call(self, method: str, *args: Any) -> asyncio.Future[Any]:
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        assert self.transport is not None
        send_message(self.transport, request_id, (method, args))
        return future


async def _connect(port: int) -> ClientProtocol:
    _, protocol = await asyncio.get_running_loop().create_connection(
        ClientProtocol, "127.0.0.1", port
    )
    return protocol


async def run_w1(samples: int) -> dict[str, Any]:
    """Two fresh server processes started, connected to and answering a first call."""
    times: list[float] = []
    for _ in range(samples):
        t0 = time.perf_counter()
        servers = _start_servers("--serve", 2)
        try:
            conns = [await _connect(port) for _, port in servers]
            replies = await asyncio.gather(*(c.call("noop", 7) for c in conns))
            times.append(time.perf_counter() - t0)
            assert replies == [7, 7]
            for conn in conns:
                assert conn.transport is not None
                conn.transport.close()
        finally:
            for proc, _ in servers:
                _stop_server(proc)
    return {"seconds": round(statistics.median(times), 4), "samples": [round(t, 4) for t in times]}


async def run_w2(conn: ClientProtocol, warmup: int, calls: int) -> dict[str, Any]:
    for i in range(warmup):
        await conn.call("noop", i)
    samples: list[int] = []
    clock = time.perf_counter_ns
    for i in range(calls):
        t0 = clock()
        await conn.call("noop", i)
        samples.append(clock() - t0)
    return _latency_summary(samples)


async def run_w3(conn: ClientProtocol, calls: int, repeats: int) -> dict[str, Any]:
    rates: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        futures = [conn.call("noop", i) for i in range(calls)]
        results = await asyncio.gather(*futures)
        elapsed = time.perf_counter() - t0
        assert sum(results) == calls * (calls - 1) // 2
        rates.append(calls / elapsed)
    return {
        "calls_per_s": round(statistics.median(rates), 1),
        "n": calls,
        "samples": [round(r, 1) for r in rates],
    }


async def run_w4(conns: list[ClientProtocol], warmup: int, calls: int) -> dict[str, Any]:
    for i in range(warmup):
        await asyncio.gather(*(c.call("noop", i) for c in conns))
    samples: list[int] = []
    clock = time.perf_counter_ns
    for i in range(calls):
        t0 = clock()
        await asyncio.gather(*(c.call("noop", i) for c in conns))
        samples.append(clock() - t0)
    return _latency_summary(samples)


async def run_w5(conn: ClientProtocol, repeats: int) -> dict[str, Any]:
    import numpy as np

    array = np.ones(W5_BYTES, dtype=np.uint8)
    assert await conn.call("length", array) == W5_BYTES
    rates: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = await conn.call("length", array)
        rates.append(W5_BYTES / (time.perf_counter() - t0) / 1e9)
        assert n == W5_BYTES
    return {
        "bytes": W5_BYTES,
        "numpy_GBps": round(statistics.median(rates), 3),
        "numpy_samples": [round(r, 3) for r in rates],
    }


def run_raw_socket(ping_calls: int, repeats: int) -> dict[str, Any]:
    """Blocking sockets: a ping's p50 and a 64 MiB one-way transfer into a reused buffer."""
    import numpy as np

    [(proc, port)] = _start_servers("--raw-serve", 1)
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reply = bytearray(U64.size)
        ping = U64.pack(8) + bytes(8)
        samples: list[int] = []
        clock = time.perf_counter_ns
        for i in range(ping_calls + ping_calls // 10):
            t0 = clock()
            sock.sendall(ping)
            _recv_exact(sock, memoryview(reply))
            if i >= ping_calls // 10:  # the first tenth is warm-up
                samples.append(clock() - t0)
        array = np.ones(W5_BYTES, dtype=np.uint8)
        payload = array.data.cast("B")
        rates: list[float] = []
        for i in range(repeats + 1):
            started = time.perf_counter()
            sock.sendall(U64.pack(W5_BYTES))
            sock.sendall(payload)
            _recv_exact(sock, memoryview(reply))
            if i > 0:  # the first transfer is warm-up (page faults on the server's buffer)
                rates.append(W5_BYTES / (time.perf_counter() - started) / 1e9)
        sock.close()
    finally:
        _stop_server(proc)
    return {
        "raw_socket_p50_us": _latency_summary(samples)["p50_us"],
        "raw_socket_GBps": round(statistics.median(rates), 3),
        "raw_socket_samples": [round(r, 3) for r in rates],
    }


async def _guarded(name: str, fn: Callable[[], Any]) -> dict[str, Any]:
    _log(f"{name} ...")
    try:
        result = fn()
        if asyncio.iscoroutine(result):
            result = await result
    except Exception as exc:  # noqa: BLE001 -- one failing figure must not hide the others
        _log(f"{name} failed: {type(exc).__name__}: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"}
    _log(f"{name}: {result}")
    assert isinstance(result, dict)
    return result


async def _client(selected: list[str], counts: dict[str, int]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    if "W1" in selected:
        report["W1"] = await _guarded("W1", lambda: run_w1(counts["w1_samples"]))
    servers = _start_servers("--serve", 4 if "W4" in selected else 1)
    try:
        conns = [await _connect(port) for _, port in servers]
        if "W2" in selected:
            report["W2"] = await _guarded(
                "W2", lambda: run_w2(conns[0], counts["w2_warmup"], counts["w2_calls"])
            )
        if "W3" in selected:
            report["W3"] = await _guarded(
                "W3", lambda: run_w3(conns[0], counts["w3_calls"], counts["w3_repeats"])
            )
        if "W4" in selected:
            report["W4"] = await _guarded(
                "W4", lambda: run_w4(conns, counts["w4_warmup"], counts["w4_calls"])
            )
        if "W5" in selected:
            report["W5"] = await _guarded("W5", lambda: run_w5(conns[0], counts["w5_repeats"]))
        for conn in conns:
            assert conn.transport is not None
            conn.transport.close()
    finally:
        for proc, _ in servers:
            _stop_server(proc)
    if "W2" in selected or "W5" in selected:
        raw = await _guarded(
            "raw socket", lambda: run_raw_socket(counts["w2_calls"], counts["w5_repeats"])
        )
        if "error" in raw:
            report["raw_socket_error"] = raw["error"]
        else:
            if isinstance(report.get("W2"), dict):
                report["W2"]["raw_socket_p50_us"] = raw["raw_socket_p50_us"]
            if isinstance(report.get("W5"), dict):
                report["W5"]["raw_socket_GBps"] = raw["raw_socket_GBps"]
                report["W5"]["raw_socket_samples"] = raw["raw_socket_samples"]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(ALL_WORKLOADS), help="e.g. W2,W5")
    parser.add_argument("--quick", action="store_true", help="about 10x smaller counts")
    parser.add_argument("--repeats", type=int, default=None, help="override W1/W3/W5 repeats")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--raw-serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve()
        return 0
    if args.raw_serve:
        _raw_serve()
        return 0

    selected = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in selected if w not in ALL_WORKLOADS]
    if unknown:
        parser.error(f"Unknown workload(s) {unknown}; choose from {list(ALL_WORKLOADS)}.")
    counts = {k: (quick if args.quick else full) for k, (full, quick) in COUNTS.items()}
    if args.repeats is not None:
        for key in ("w1_samples", "w3_repeats", "w5_repeats"):
            counts[key] = args.repeats
    report: dict[str, Any] = {
        "system": "asyncio-floor",
        "version": None,
        "python": platform.python_version(),
        "quick": args.quick,
        "counts": counts,
    }
    report.update(asyncio.run(_client(selected, counts)))
    print(json.dumps(report), flush=True)
    failed = any(isinstance(report.get(w), dict) and "error" in report[w] for w in selected)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
