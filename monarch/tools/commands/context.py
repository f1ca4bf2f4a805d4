"""`monarch context {create,use,rm,ls}`: named job contexts of a project directory."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `context` subcommand and its actions."""
    p = sub.add_parser("context", help="manage named job contexts")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    create = actions.add_parser("create", help="create a context for a job spec")
    create.add_argument("name")
    create.add_argument("spec", help="module.attr or path.py:attr")
    use = actions.add_parser("use", help="make a context current")
    use.add_argument("name")
    rm = actions.add_parser("rm", help="delete a context (killing its job)")
    rm.add_argument("name")
    actions.add_parser("ls", help="list contexts; the current one is starred")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out the context action."""
    from monarch._src.job import current

    if args.action == "create":
        current.set_current_job(args.spec, context=args.name)
        print(f"context {args.name} created for {args.spec}")
    elif args.action == "use":
        current.use_context(args.name)
        print(f"using context {args.name}")
    elif args.action == "rm":
        current.remove_context(args.name)
        print(f"context {args.name} removed")
    else:
        here = current.current_context()
        names = sorted({*current.list_contexts(), here, current.DEFAULT_CONTEXT})
        for name in names:
            print(("* " if name == here else "  ") + name)
    return 0
