"""`monarch debug`: list the actors paused in a running client's debugger and attach to one.

    monarch debug [--host HOST] [--port PORT] [--attach NAME [RANK]]

With a client that published its control server in this directory (or `MONARCH_CONTROL_TOKEN`
set), and without `--attach`, it starts a small shell (`monarch_dbg>`): `list` shows paused
actors by mesh name and rank, `attach NAME [RANK]` (or `attach N`, the N-th listed) hands the
terminal to that actor's pdb until it continues, `quit` leaves. pdb commands typed while attached
run in the actor's frame; `continue` resumes the actor. Works on a terminal and with piped input.
Which client: see `monarch._src.admin.client.find_server`. With no token for that address, the
address is taken for the debug controller's terminal server (the client's
`MONARCH_DEBUG_SERVER_HOST`/`_PORT`, as in torchmonarch's `monarch debug`): its own
`monarch_dbg>` shell (with `cast` and `continue` to many ranks), whose text this command relays.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO, TextIO

from monarch._src.admin.client import ControlConnection, Server, find_server, request

__all__ = ["main", "register", "run_debug", "run_terminal"]

_PROMPT = "monarch_dbg> "


def register(subparsers: Any) -> None:
    """Add the `debug` subcommand."""
    p = subparsers.add_parser("debug", help="list and attach to actors paused in the debugger",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    p.set_defaults(func=handle)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=None, help="the client's debug server host")
    p.add_argument("--port", type=int, default=None, help="the client's debug server port")
    p.add_argument("--attach", nargs="+", metavar=("NAME", "RANK"), default=None,
                   help="attach to this paused actor at once, then exit")


def handle(args: argparse.Namespace) -> int:
    """Run `monarch debug` with parsed arguments: the control server of a client that
    published one here (its token), else the debug controller's terminal server at that
    address, a plain text shell (`monarch_dbg>`) this command only relays."""
    server = find_server(args.host, args.port)
    if not server.token and args.attach is None:
        return run_terminal(server.host, server.port)
    return run_debug(server, args.attach)


def run_terminal(host: str, port: int, stdin: BinaryIO | None = None,
                 stdout: BinaryIO | None = None) -> int:
    """Relay lines from `stdin` to the terminal server at host:port and its text to `stdout`
    until the server closes the connection (after `quit`, or once `stdin` ended); the exit
    status."""
    src = stdin if stdin is not None else sys.stdin.buffer
    dst = stdout if stdout is not None else sys.stdout.buffer
    try:
        sock = socket.create_connection((host, port), timeout=5.0)
    except OSError as exc:
        sys.stderr.write(f"monarch debug: No monarch client is serving debug/admin requests at "
                         f"{host}:{port} ({exc}). Start your program (a breakpoint() or "
                         "debug_controller() starts the server), or pass --host/--port.\n")
        return 1
    sock.settimeout(None)

    def forward_input() -> None:
        try:
            for line in iter(src.readline, b""):
                sock.sendall(line)
        except OSError:
            return  # the server closed the connection
        try:
            sock.shutdown(socket.SHUT_WR)  # end of input: the shell ends, the server closes
        except OSError:
            pass  # the server closed the connection first: nothing left to end

    threading.Thread(target=forward_input, name="monarch-debug-input", daemon=True).start()
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return 0
            dst.write(data)
            dst.flush()
    except KeyboardInterrupt:
        return 130
    finally:
        sock.close()


def _list(address: Server) -> list[dict[str, Any]]:
    sessions: list[dict[str, Any]] = request(address, {"op": "list"})["sessions"]
    return sessions


def _print_sessions(sessions: list[dict[str, Any]], out: TextIO) -> None:
    if not sessions:
        out.write("no paused actors\n")
        return
    out.write(f"  {'#':>2}  {'NAME':<16} {'RANK':>4}  {'KIND':<11} WHERE\n")
    out.writelines(f"  {i:>2}  {s['name']:<16} {s['rank']:>4}  {s['kind']:<11} {s['where']}\n"
                   for i, s in enumerate(sessions))


def attach(address: Server, name: str | None, rank: int | None,
           ask: Callable[[str], str], out: TextIO) -> None:
    """Hand the terminal to one paused actor's pdb until it resumes (or input ends)."""
    with ControlConnection(address, {"op": "attach", "name": name, "rank": rank},
                           timeout=3600.0) as conn:
        info = conn.receive()["attached"]
        out.write(f"--- attached to {info['display']} ({info['kind']}) ---\n")
        for msg in conn.messages():
            if "end" in msg:
                out.write(f"--- {info['name']} rank {info['rank']} resumed ---\n")
                return
            text: str = msg["out"]
            if not msg["input"]:
                out.write(text)
                continue
            cut = text.rfind("\n") + 1
            out.write(text[:cut])
            out.flush()
            try:
                line = ask(text[cut:])
            except EOFError:
                out.write("\n--- detached; the actor stays paused ---\n")
                return
            conn.send({"line": line})


def _parse_target(words: list[str], sessions: list[dict[str, Any]]) -> tuple[str, int | None]:
    if len(words) == 1 and words[0].isdigit() and int(words[0]) < len(sessions):
        s = sessions[int(words[0])]
        return s["name"], int(s["rank"])
    if len(words) not in (1, 2) or (len(words) == 2 and not words[1].lstrip("-").isdigit()):
        raise ValueError("Use: attach NAME [RANK], or attach N for the N-th listed actor.")
    return words[0], int(words[1]) if len(words) == 2 else None


def _echoing_input(out: TextIO) -> Callable[[str], str]:
    """`input`, echoing each line read from a pipe so the transcript shows the commands."""
    def ask(prompt: str) -> str:
        line = input(prompt)
        out.write(line + "\n")
        return line

    return ask


def run_debug(address: Server, target: list[str] | None = None,
              ask: Callable[[str], str] | None = None, out: TextIO | None = None) -> int:
    """The `monarch debug` shell (or one `--attach`); returns the exit status."""
    out = out if out is not None else sys.stdout
    if ask is None:
        ask = input if sys.stdin.isatty() else _echoing_input(out)
    try:
        sessions = _list(address)
        if target is not None:
            name, rank = _parse_target(target, sessions)
            attach(address, name, rank, ask, out)
            return 0
        out.write(f"monarch debug: connected to {address[0]}:{address[1]}\n")
        _print_sessions(sessions, out)
        while True:
            out.flush()
            try:
                line = ask(_PROMPT).strip()
            except EOFError:
                out.write("\n")
                return 0
            words = line.split()
            if not words:
                continue
            cmd, rest = words[0], words[1:]
            if cmd in ("quit", "exit", "q"):
                return 0
            if cmd in ("list", "ls", "l"):
                sessions = _list(address)
                _print_sessions(sessions, out)
            elif cmd in ("attach", "a"):
                try:
                    name, rank = _parse_target(rest, sessions)
                    attach(address, name, rank, ask, out)
                except (ValueError, RuntimeError) as exc:
                    out.write(f"{exc}\n")
                # Indices refer to the last list shown: show the current one.
                try:
                    sessions = _list(address)
                except (ConnectionError, OSError):
                    # The program ended (its last paused actor just resumed): nothing is left.
                    out.write(f"monarch debug: the client at {address[0]}:{address[1]} has "
                              "exited\n")
                    return 0
                _print_sessions(sessions, out)
            elif cmd == "help":
                out.write("commands: list, attach NAME [RANK], attach N, quit\n")
            else:
                out.write(f"unknown command {cmd!r}; commands: list, attach NAME [RANK], "
                          "attach N, quit\n")
    except (ConnectionError, RuntimeError) as exc:
        sys.stderr.write(f"monarch debug: {exc}\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    """Entry point for `python -m monarch.tools.commands.debug`."""
    parser = argparse.ArgumentParser(prog="monarch debug", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    return handle(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
