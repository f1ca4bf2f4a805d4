"""monarch.tools.utils (MONARCH_HOME, conda), CondaEnvironment's error and `monarch dashboard`."""

from __future__ import annotations

import pathlib

import pytest

from monarch.tools.cli import get_parser, main
from monarch.tools.config.environment import CondaEnvironment, NoActiveCondaEnvironment
from monarch.tools.utils import MONARCH_HOME, conda

pytestmark = pytest.mark.timeout(30)


def test_monarch_home_defaults_under_the_user_home(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MONARCH_HOME", raising=False)
    monkeypatch.setattr(pathlib.Path, "home", lambda: tmp_path / "ann")
    assert MONARCH_HOME() == tmp_path / "ann" / ".monarch"
    assert MONARCH_HOME("a", "b") == tmp_path / "ann" / ".monarch" / "a" / "b"
    assert (tmp_path / "ann" / ".monarch" / "a" / "b").is_dir()


def test_monarch_home_follows_the_variable(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONARCH_HOME", str(tmp_path / "h"))
    assert MONARCH_HOME("x") == tmp_path / "h" / "x"
    assert (tmp_path / "h" / "x").is_dir()


def test_conda_reads_the_active_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONDA_PREFIX", "/opt/envs/train-py3/")
    assert conda.active_env_dir() == "/opt/envs/train-py3/"
    assert conda.active_env_name() == "train-py3"
    monkeypatch.setenv("CONDA_PREFIX", "")
    assert conda.active_env_dir() is None
    monkeypatch.delenv("CONDA_PREFIX")
    assert conda.active_env_name() is None


def test_conda_environment_without_prefix_or_active_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    env = CondaEnvironment()
    with pytest.raises(NoActiveCondaEnvironment, match="conda_prefix=") as info:
        _ = env.conda_prefix
    # torchmonarch raises AssertionError; ours is also a ValueError (a bad argument)
    assert isinstance(info.value, AssertionError) and isinstance(info.value, ValueError)
    monkeypatch.setenv("CONDA_PREFIX", "/opt/envs/a")
    assert env.conda_prefix == "/opt/envs/a"
    assert CondaEnvironment("/opt/envs/b").conda_prefix == "/opt/envs/b"


def test_dashboard_mast_parses_and_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    args = get_parser().parse_args(["dashboard", "mast", "job1", "--dashboard-port", "9"])
    assert (args.job, args.role_name, args.dashboard_port) == ("job1", None, 9)
    assert main(["dashboard", "mast", "job1"]) == 1
    assert "MAST job 'job1'" in capsys.readouterr().err
    assert main(["dashboard"]) == 1
    assert "mast" in capsys.readouterr().err
