"""Environments a `Workspace` can carry: the packages its projects run with."""

from __future__ import annotations

from monarch.tools.utils import conda

__all__ = ["CondaEnvironment", "Environment", "NoActiveCondaEnvironment"]


class NoActiveCondaEnvironment(AssertionError, ValueError):
    """No `conda_prefix` was given and no conda environment is active. An `AssertionError` as in
    torchmonarch, and a `ValueError` since it is a bad argument."""


class Environment:
    """The dependencies of a workspace's projects (base class)."""


class CondaEnvironment(Environment):
    """A conda environment: `conda_prefix`, or the active one (`$CONDA_PREFIX`) when None."""

    def __init__(self, conda_prefix: str | None = None) -> None:
        self._conda_prefix = conda_prefix

    @property
    def conda_prefix(self) -> str:
        """The environment's directory."""
        prefix = self._conda_prefix or conda.active_env_dir()
        if not prefix:
            raise NoActiveCondaEnvironment(
                "No conda environment is active. Pass CondaEnvironment(conda_prefix=...) or "
                "activate one."
            )
        return prefix

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CondaEnvironment) and other._conda_prefix == self._conda_prefix

    def __hash__(self) -> int:
        return hash(self._conda_prefix)
