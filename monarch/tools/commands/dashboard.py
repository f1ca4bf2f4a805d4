"""`monarch dashboard mast JOB [--role-name ROLE] [--dashboard-port PORT]`.

torchmonarch relays the dashboard of a job running on MAST, Meta's internal scheduler, through
this host. The command line is kept so scripts written for torchmonarch parse the same way,
but neither MAST nor the dashboard exists in this implementation (the telemetry sidecar is out
of scope: `JobState.dashboard_url` is always None), so running it reports that and exits 1,
as torchmonarch's public builds do.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["DEFAULT_DASHBOARD_PORT", "register", "run"]

DEFAULT_DASHBOARD_PORT = 8265  # torchmonarch's default dashboard port on a MAST task


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `dashboard` subcommand and its `mast` action."""
    p = sub.add_parser("dashboard", help="serve a job's dashboard (MAST only; not available here)")
    actions = p.add_subparsers(dest="dashboard_cmd", metavar="ACTION")
    mast = actions.add_parser("mast", help="relay a MAST job's dashboard through this host")
    mast.add_argument("job", help="the MAST job name")
    mast.add_argument("--role-name", default=None,
                      help="the MAST role hosting the dashboard (default: probe every role)")
    mast.add_argument("--dashboard-port", type=int, default=DEFAULT_DASHBOARD_PORT,
                      help="the dashboard's port on the MAST task (default %(default)s)")
    p.set_defaults(func=run, _dashboard_parser=p)


def run(args: argparse.Namespace) -> int:
    """Print the help without an action; refuse `mast` with the reason."""
    if args.dashboard_cmd is None:
        args._dashboard_parser.print_help(sys.stderr)
        return 1
    raise NotImplementedError(
        f"cannot relay the dashboard of MAST job {args.job!r}: MAST is Meta's internal "
        "scheduler and this monarch has no dashboard. Use `monarch top` or `monarch stacks` "
        "to watch a running job."
    )
