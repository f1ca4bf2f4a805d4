"""`monarch stacks MESH RANK`: every thread's stack in one proc of a running client.

    monarch stacks [--url ADMIN_URL | --host HOST --port PORT] [--no-py-spy] [--json] MESH RANK

MESH is the name an actor mesh was spawned with (`procs.spawn("trainer", ...)`) or a proc mesh's
name (`spawn_procs(..., name=...)`), RANK the rank within it; `client` names the client process
itself. It reads the client's mesh admin HTTP API (`/v1/stacks`); the client is found as for
`monarch debug`, or given by `--url` (`job.state().admin_url`). The dump shows each thread's
Python stack (actor threads labelled) and, when py-spy is installed and may attach, py-spy's
dump too.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from typing import Any

from monarch._src.admin.client import add_target_arguments, admin_get, target_of

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
    add_target_arguments(p)
    p.add_argument("--no-py-spy", action="store_true", help="Python stacks only")
    p.add_argument("--json", action="store_true", help="print the dump as JSON")


def handle(args: argparse.Namespace) -> int:
    """Run `monarch stacks` with parsed arguments."""
    query = {"mesh": args.mesh, "rank": args.rank}
    if args.no_py_spy:
        query["no_py_spy"] = 1
    try:
        dump = admin_get(target_of(args), "/v1/stacks?" + urllib.parse.urlencode(query))
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
