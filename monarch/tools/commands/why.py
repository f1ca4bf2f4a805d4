"""`monarch why`: why is a running client's mesh not making progress?

    monarch why [--url ADMIN_URL | --host HOST --port PORT] [--py-spy] [--no-stacks] [--json]

Gathers every actor rank's Python stack and calls in flight (endpoint and age), groups the ranks
whose stacks match and names the outliers: "3 ranks of trainer in `all_reduce` for 212 s; rank
2 of trainer in `load_batch` for 212 s". Each group shows its ranks and the innermost frames of
its stack. Procs that do not answer are listed apart; `--py-spy` adds py-spy's dump of each
outlier and of each proc that does not answer (native frames, the GIL holder). It reads the
client's mesh admin HTTP API (`/v1/why`); the client is found as for `monarch debug`, or given
by `--url` (`job.state().admin_url`). Exit status 0 when it could ask, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from monarch._src.admin.client import add_target_arguments, admin_get, target_of

__all__ = ["main", "register"]


def register(subparsers: Any) -> None:
    """Add the `why` subcommand."""
    p = subparsers.add_parser("why", help="hang triage: where every rank is, outliers named",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    p.set_defaults(func=handle)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_target_arguments(p)
    p.add_argument("--py-spy", action="store_true",
                   help="add py-spy's dump of outliers and of procs that do not answer")
    p.add_argument("--no-stacks", action="store_true", help="the summary lines only")
    p.add_argument("--json", action="store_true", help="print the triage as JSON")


def handle(args: argparse.Namespace) -> int:
    """Run `monarch why` with parsed arguments."""
    from monarch._src.admin.why import format_triage

    try:
        result = admin_get(target_of(args), "/v1/why" + ("?py_spy=1" if args.py_spy else ""))
    except (ConnectionError, RuntimeError) as exc:
        sys.stderr.write(f"monarch why: {exc}\n")
        return 1
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        sys.stdout.write(format_triage(result, stacks=not args.no_stacks))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for `python -m monarch.tools.commands.why`."""
    parser = argparse.ArgumentParser(prog="monarch why", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    return handle(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
