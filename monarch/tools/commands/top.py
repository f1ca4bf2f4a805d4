"""`monarch top`: a live terminal view of a running client's hosts, procs and actors.

    monarch top [--url ADMIN_URL | --host HOST --port PORT] [--interval SECONDS] [--once]

Shows each proc and actor with its state (starting, running, paused, failed, stopped), message
counts and rates, and the recent failures; `q` quits. With `--once` (or when output is not a
terminal, one screen per interval) it prints instead of redrawing. It reads the client's mesh
admin HTTP API (`/v1/snapshot`): the client is found as for `monarch debug` (the newest live
`.monarch/controller-<pid>.json` here), or given by `--url` (`job.state().admin_url`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from monarch._src.admin.client import add_target_arguments, admin_get, target_of

__all__ = ["main", "register"]


def register(subparsers: Any) -> None:
    """Add the `top` subcommand."""
    p = subparsers.add_parser("top", help="live view of hosts, procs and actors",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    p.set_defaults(func=handle)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_target_arguments(p)
    p.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes")
    p.add_argument("--once", action="store_true", help="print one screen and exit")
    p.add_argument("--iterations", type=int, default=None, help="exit after this many screens")


def handle(args: argparse.Namespace) -> int:
    """Run `monarch top` with parsed arguments."""
    from monarch._src.admin.tui import run_top

    target = target_of(args)

    def fetch() -> dict[str, Any]:
        snapshot: dict[str, Any] = admin_get(target, "/v1/snapshot")
        return snapshot

    try:
        return run_top(fetch, interval=args.interval, once=args.once, iterations=args.iterations)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        sys.stderr.write(f"monarch top: {exc}\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    """Entry point for `python -m monarch.tools.commands.top`."""
    parser = argparse.ArgumentParser(prog="monarch top", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    return handle(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
