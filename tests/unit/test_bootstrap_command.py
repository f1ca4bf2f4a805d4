"""BootstrapCommand as data: fields, checks, with_env, repr, the env a proc gets from it."""

from __future__ import annotations

import sys

import pytest

from monarch._rust_bindings.monarch_hyperactor.host_mesh import BootstrapCommand
from monarch._src.hosts.bootstrap_command import (
    check_commands,
    launch_env,
    launch_record,
    program_problem,
)
from monarch.actor import default_bootstrap_cmd


def test_default_bootstrap_cmd_runs_bootstrap_main_with_this_interpreter() -> None:
    cmd = default_bootstrap_cmd()
    assert (cmd.program, cmd.arg0, cmd.args, cmd.env, cmd.inherit_env) == (
        sys.executable, None, ["-m", "monarch._src.actor.bootstrap_main"], {}, True)


def test_with_env_merges_into_a_copy_and_none_removes() -> None:
    base = BootstrapCommand("p", "zz", ["a"], {"K": "v", "L": "w"}, inherit_env=False)
    other = base.with_env({"K": None, "M": "1"})
    assert other.env == {"K": None, "L": "w", "M": "1"}
    assert (other.program, other.arg0, other.args, other.inherit_env) == ("p", "zz", ["a"], False)
    assert base.env == {"K": "v", "L": "w"}


def test_repr_is_monarchs() -> None:
    cmd = BootstrapCommand("p", None, ["-m", "x"], {"B": None, "A": "1"})
    assert repr(cmd) == ('BootstrapCommand(program=\'p\', args=["-m", "x"], '
                         'env={"B": None, "A": Some("1")}, inherit_env=True)')


def test_bad_fields_raise_type_error() -> None:
    with pytest.raises(TypeError, match="program must be a str"):
        BootstrapCommand(1, None, [], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"env\['A'\] must be a str"):
        BootstrapCommand("p", None, [], {"A": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="args must be a list"):
        BootstrapCommand("p", None, "-m x", {})  # type: ignore[arg-type]
    cmd = BootstrapCommand("p", None, [], {})
    with pytest.raises(TypeError, match="inherit_env must be a bool"):
        cmd.inherit_env = "no"  # type: ignore[assignment]


def test_check_commands_names_the_rank_that_is_not_a_command() -> None:
    good = default_bootstrap_cmd()
    assert check_commands([good, good], 2, "spawn") == [launch_record(good)] * 2
    with pytest.raises(TypeError, match="for proc 1 it is int 3"):
        check_commands([good, 3], 2, "spawn")


def test_launch_env_inherits_or_starts_empty() -> None:
    record = launch_record(BootstrapCommand("p", None, [], {"A": "1", "H": None}))
    assert launch_env(record, {"H": "home", "P": "x"}) == {"P": "x", "A": "1"}
    record["inherit_env"] = False
    assert launch_env(record, {"H": "home", "P": "x"}) == {"A": "1"}


def test_program_problem_names_a_missing_program() -> None:
    assert program_problem(launch_record(default_bootstrap_cmd()), {}) is None
    missing = launch_record(BootstrapCommand("/nonexistent/py", None, [], {}))
    assert "does not exist on this host" in str(program_problem(missing, {}))
    bare = launch_record(BootstrapCommand("sh", None, [], {}))
    assert program_problem(bare, {"PATH": "/bin:/usr/bin"}) is None
    assert "not on the PATH" in str(program_problem(bare, {"PATH": "/nonexistent"}))
