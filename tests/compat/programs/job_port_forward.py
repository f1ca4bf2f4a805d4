"""Monarch's jobs API reference, ``monarch.job.PortForwarder``: reaching a service on a host of
the mesh through a port of another proc.

Follows the reference of ``PortForwarder``: spawn it on the client's proc, call
``forward(dst_proc_mesh, dst_port, src_proc_mesh, "address:port")``; each source proc listens on
that address and relays every connection to ``127.0.0.1:dst_port`` as seen from the destination
proc at the same point (here a small echo service the client runs); ``dst_port``/``src_address``
may be functions of the point; bad ports, addresses and mismatched meshes fail the call; stopping
the forwarder closes the listeners.
"""

import socket
import threading

from compat import check

from monarch.actor import ActorError, this_host, this_proc
from monarch.job import PortForwarder


def serve_echo(sock: socket.socket) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with conn:
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
            conn.sendall(b"echo:" + data)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def roundtrip(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := c.recv(65536):
            out += chunk
        return out


def failure(fn) -> str:
    try:
        fn()
    except ActorError:
        return "ActorError"
    return "no error"


service = socket.socket()
service.bind(("127.0.0.1", 0))
service.listen()
threading.Thread(target=serve_echo, args=(service,), daemon=True).start()
service_port = service.getsockname()[1]

procs = this_host().spawn_procs(per_host={"gpus": 2})
fwd = this_proc().spawn("fwd", PortForwarder)
ports = [free_port(), free_port()]
result = fwd.forward.call_one(procs, service_port, procs,
                              lambda point: f"127.0.0.1:{ports[point['gpus']]}").get()
check("forward returns", result)
check("through the first source proc", roundtrip(ports[0], b"hello"))
check("through the second source proc", roundtrip(ports[1], b"world"))
big = bytes(range(256)) * 1024
check("a 256 KiB payload arrives whole and in order", roundtrip(ports[0], big) == b"echo:" + big)

one = this_host().spawn_procs(per_host={"gpus": 1})
check("port 0 fails the call", failure(
    lambda: fwd.forward.call_one(one, 0, one, f"127.0.0.1:{free_port()}").get()))
check("an address without a port fails the call", failure(
    lambda: fwd.forward.call_one(one, service_port, one, "localhost").get()))
check("meshes of different shapes fail the call", failure(
    lambda: fwd.forward.call_one(procs, service_port, one, f"127.0.0.1:{free_port()}").get()))

fwd.stop().get()
try:
    socket.create_connection(("127.0.0.1", ports[0]), timeout=10).close()
    after = "still listening"
except ConnectionRefusedError:
    after = "refused"
check("after the forwarder stops", after)
procs.stop().get()
one.stop().get()
