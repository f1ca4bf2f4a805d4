"""Bootstrap commands: the program a host runs to start a proc (`spawn_procs(bootstrap_command=)`).

Normally a host forks each proc from its fork server (`zygote.py`), which already imported the
runtime. A `BootstrapCommand` makes the forked child exec a program instead, with the
environment the command describes, so that what must be set before the interpreter starts
(`CUDA_VISIBLE_DEVICES` before anything imports CUDA, `LD_PRELOAD`, a wrapper script, another
venv) is. The program must end up running `python -m monarch._src.actor.bootstrap_main` (what
`default_bootstrap_cmd()` is), which reads the proc's spec from the file descriptor named by
`MONARCH_PROC_SPEC_FD` (`exec_proc.py`); a wrapper script that ends in `exec "$@"` or
`exec python -m monarch._src.actor.bootstrap_main` works too.

The environment, as on Monarch: with `inherit_env` (the default) the proc starts from the
environment procs of that host get anyway (the client's for `this_host()`, the worker's for a
remote host), with `env` on top (a None value removes the variable); without it, from `env`
alone. Monarch's launch variables (`MONARCH_PROC_SPEC_FD`, and `PYTHONPATH` naming this
monarch) are always added for the interpreter and removed again once the proc runs.

A command travels to a remote host as a plain dict (`launch_record`), and the host that forks
the proc checks it there (`program_problem`): a program that is not an executable file fails
that proc's rank, saying so, instead of starting.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "BOOTSTRAP_MAIN",
    "SPEC_FD_ENV",
    "BootstrapCommand",
    "check_commands",
    "default_bootstrap_cmd",
    "launch_env",
    "launch_record",
    "program_problem",
]

BOOTSTRAP_MAIN = "monarch._src.actor.bootstrap_main"
SPEC_FD_ENV = "MONARCH_PROC_SPEC_FD"  # the fd of the proc's spec, set for the exec'd program


class BootstrapCommand:
    """How a host starts one proc: `program` run with argv `[arg0 or program, *args]`.

    `env` is applied on top of the inherited environment (`inherit_env=True`, the default) or
    of an empty one; a None value removes that variable. `with_env` returns a modified copy.
    """

    def __init__(self, program: str, arg0: str | None, args: list[str],
                 env: Mapping[str, str | None], inherit_env: bool = True) -> None:
        self.program = program
        self.arg0 = arg0
        self.args = args
        self.env = env  # the setter checks and copies it
        self.inherit_env = inherit_env

    @property
    def program(self) -> str:
        return self._program

    @program.setter
    def program(self, value: str) -> None:
        self._program = _text(value, "program")

    @property
    def arg0(self) -> str | None:
        return self._arg0

    @arg0.setter
    def arg0(self, value: str | None) -> None:
        self._arg0 = None if value is None else _text(value, "arg0")

    @property
    def args(self) -> list[str]:
        return self._args

    @args.setter
    def args(self, value: list[str]) -> None:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise TypeError(f"BootstrapCommand: args must be a list of str, got "
                            f"{type(value).__name__}.")
        self._args = [_text(a, "args") for a in value]

    @property
    def env(self) -> dict[str, str | None]:
        """The variables set (a str) or removed (None) on top of the starting environment."""
        return dict(self._env)

    @env.setter
    def env(self, value: Mapping[str, str | None]) -> None:
        if not isinstance(value, Mapping):
            raise TypeError(f"BootstrapCommand: env must be a dict of str to str or None, got "
                            f"{type(value).__name__}.")
        self._env = {_text(k, "env key"): None if v is None else _text(v, f"env[{k!r}]")
                     for k, v in value.items()}

    @property
    def inherit_env(self) -> bool:
        return self._inherit_env

    @inherit_env.setter
    def inherit_env(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"BootstrapCommand: inherit_env must be a bool, got "
                            f"{type(value).__name__}.")
        self._inherit_env = value

    def with_env(self, env: Mapping[str, str | None]) -> BootstrapCommand:
        """A copy with `env` merged over this command's env (a None value removes the
        variable); this command is unchanged."""
        merged: dict[str, str | None] = dict(self._env)
        merged.update(BootstrapCommand(self.program, None, [], env).env)
        return BootstrapCommand(self.program, self.arg0, list(self.args), merged,
                                self.inherit_env)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BootstrapCommand) and launch_record(self) == launch_record(other)

    def __hash__(self) -> int:
        return hash((self.program, self.arg0, tuple(self.args)))

    def __repr__(self) -> str:
        # Monarch's form: the env as its Rust map of Options.
        env = ", ".join(f"{json.dumps(k)}: {'None' if v is None else f'Some({json.dumps(v)})'}"
                        for k, v in self._env.items())
        return (f"BootstrapCommand(program={self.program!r}, args={json.dumps(self.args)}, "
                f"env={{{env}}}, inherit_env={self.inherit_env})")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"BootstrapCommand: {what} must be a str, got {type(value).__name__} "
                        f"{value!r}.")
    return value


def default_bootstrap_cmd() -> BootstrapCommand:
    """The command a host starts a proc with: this interpreter running
    `-m monarch._src.actor.bootstrap_main`, inheriting the host's environment. A base for
    `spawn_procs(bootstrap_command=default_bootstrap_cmd().with_env({...}))`."""
    return BootstrapCommand(sys.executable, None, ["-m", BOOTSTRAP_MAIN], {})


def launch_record(cmd: BootstrapCommand) -> dict[str, Any]:
    """`cmd` as plain data (what travels in a proc's spec, to a remote host too)."""
    return {"program": cmd.program, "arg0": cmd.arg0, "args": list(cmd.args),
            "env": cmd.env, "inherit_env": cmd.inherit_env}


def check_commands(commands: list[Any], n: int, what: str) -> list[dict[str, Any]]:
    """The launch records of `n` procs' commands (one per proc, in rank order); TypeError
    naming the rank whose callable did not return a `BootstrapCommand`."""
    if len(commands) != n:
        raise ValueError(f"{what}: {len(commands)} bootstrap commands for {n} procs.")
    records = []
    for rank, cmd in enumerate(commands):
        if isinstance(cmd, dict):  # a record already (a served host gets these)
            records.append(launch_record(BootstrapCommand(
                cmd["program"], cmd["arg0"], cmd["args"], cmd["env"], cmd["inherit_env"])))
            continue
        if not isinstance(cmd, BootstrapCommand):
            raise TypeError(
                f"{what}: bootstrap_command must be a BootstrapCommand or a callable returning "
                f"one for each proc's Point; for proc {rank} it is {type(cmd).__name__} "
                f"{cmd!r}. Start from default_bootstrap_cmd().with_env({{...}})."
            )
        records.append(launch_record(cmd))
    return records


def launch_env(record: Mapping[str, Any], inherited: Mapping[str, str]) -> dict[str, str]:
    """The environment a proc started by `record` runs with: `inherited` (the host's procs'
    environment) or nothing, then the record's env on top."""
    env = dict(inherited) if record["inherit_env"] else {}
    for key, value in record["env"].items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def program_problem(record: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Why this host cannot run the record's program (not found on the env's PATH, not an
    executable file), or None."""
    program = record["program"]
    if os.sep in program:
        if not os.path.isfile(program):
            return f"bootstrap_command program {program!r} does not exist on this host"
        if not os.access(program, os.X_OK):
            return f"bootstrap_command program {program!r} is not executable"
        return None
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        return (f"bootstrap_command program {program!r} is not on the PATH of its environment "
                f"on this host")
    return None
