"""`monarch stacks MESH RANK`: every thread's stack in one proc of a running client.

    monarch stacks [--host HOST] [--port PORT] [--no-py-spy] [--json] MESH RANK

MESH is the name an actor mesh was spawned with (`procs.spawn("trainer", ...)`) or a proc mesh's
name (`spawn_procs(..., name=...)`), RANK the rank within it; `client` names the client process
itself. The client is found as for `monarch debug` (its control server must be running: a
breakpoint or `debug_controller()` starts it). The dump shows each thread's Python stack (actor
threads labelled) and, when py-spy is installed and may attach, py-spy's dump too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from monarch._src.admin.client import find_server, request

__all__ = ["main", "register"]


def register(subparsers: Any) -> None:
    """Add the `stacks` subcommand."""
    p = subparsers.add_parser("stacks", help="dump the stacks of one proc of a running mesh",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    p.set_defaults(func=handle)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("mesh", help="actor or proc mesh name, or 'client'")
    p.add_argument("rank", type=int, help="rank within that mesh")
    p.add_argument("--host", default=None, help="the client's control server host")
    p.add_argument("--port", type=int, default=None, help="the client's control server port")
    p.add_argument("--no-py-spy", action="store_true", help="Python stacks only")
    p.add_argument("--json", action="store_true", help="print the dump as JSON")


def handle(args: argparse.Namespace) -> int:
    """Run `monarch stacks` with parsed arguments."""
    address = find_server(args.host, args.port)
    try:
        dump = request(address, {"op": "stacks", "mesh": args.mesh, "rank": args.rank,
                                 "py_spy": not args.no_py_spy})["dump"]
    except (ConnectionError, RuntimeError) as exc:
        sys.stderr.write(f"monarch stacks: {exc}\n")
        return 1
    if args.json:
        sys.stdout.write(json.dumps(dump) + "\n")
        return 0
    sys.stdout.write(f"=== {args.mesh}[{args.rank}]: proc {dump['proc_id']} "
                     f"(pid {dump['pid']}) ===\n{dump['python']}")
    if dump["py_spy"] is not None:
        sys.stdout.write(f"--- py-spy ---\n{dump['py_spy']}")
    else:
        sys.stdout.write(f"(py-spy: {dump['py_spy_note']})\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for `python -m monarch.tools.commands.stacks`."""
    parser = argparse.ArgumentParser(prog="monarch stacks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    return handle(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
