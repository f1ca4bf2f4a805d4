"""`monarch context {create,use,rm,ls}`: named job contexts of a project directory.

The layout is torchmonarch's (`monarch._src.job.current`): each context is a directory of
`.monarch/`, and `.monarch/job_state.pkl` links to the current one's applied job. `ls` lists the
directories ("No contexts." when there are none), starring the current one.
"""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `context` subcommand and its actions."""
    p = sub.add_parser("context", help="manage named job contexts")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    create = actions.add_parser("create", help="create a context (optionally with a job spec)")
    create.add_argument("name")
    create.add_argument("spec", nargs="?", default=None,
                        help="module.attr or path.py:attr (default: none; `apply` records one)")
    use = actions.add_parser("use", help="make a context current (created if missing)")
    use.add_argument("name")
    rm = actions.add_parser("rm", help="delete a context (killing its job)")
    rm.add_argument("name")
    actions.add_parser("ls", help="list contexts; the current one is starred")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out the context action."""
    from monarch._src.job import current

    if args.action == "create":
        current.create_context(args.name, args.spec)
        print(f"Created context '{args.name}'" + (f" for {args.spec}" if args.spec else ""))
    elif args.action == "use":
        current.use_context(args.name)
        print(f"Switched to context '{args.name}'")
    elif args.action == "rm":
        current.remove_context(args.name)
        print(f"Removed context '{args.name}'")
    else:
        names = current.list_contexts()
        if not names:
            print("No contexts.")
            return 0
        here = current.current_context()
        for name in names:
            print(("* " if name == here else "  ") + name)
    return 0
