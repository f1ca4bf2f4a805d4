"""The `monarch` command: one subcommand per module of `monarch.tools.commands`.

Each module in `COMMANDS` has `register(subparsers)`, which adds its parser and sets `func`
(called with the parsed arguments, returning the exit status). Modules are imported when the
parser is built; heavy imports (the runtime, torch) happen inside `func`, so `monarch --help`
stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from monarch.tools.commands.shell import shell_on_job

__all__ = ["COMMANDS", "build_parser", "get_parser", "main", "shell_on_job"]

# Subcommand modules under monarch.tools.commands, in the order `--help` lists them.
COMMANDS: tuple[str, ...] = (
    "apply", "exec", "kill", "shell", "context", "worker", "debug", "stacks", "top", "why",
    "dashboard",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="monarch", description="Bring up monarch jobs and run commands on their hosts."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"monarch.tools.commands.{name}").register(sub)
    return parser


get_parser = build_parser  # torchmonarch's name


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `monarch` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:
        # The worker's own parser owns every later argument, --help included.
        from monarch.tools.commands.worker import run_argv

        return run_argv(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (FileNotFoundError, ValueError, TypeError, RuntimeError, NotImplementedError,
            AttributeError, ImportError, TimeoutError) as exc:
        sys.stderr.write(f"monarch {args.command}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
