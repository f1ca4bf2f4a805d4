"""Subcommands of `monarch`; each module has `register(subparsers)`."""
