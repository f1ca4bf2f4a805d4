"""Small helpers of the `monarch` tools: monarch's home directory and the active conda env."""

from __future__ import annotations

import os
import pathlib

__all__ = ["MONARCH_HOME", "conda"]


def MONARCH_HOME(*subdir_paths: str) -> pathlib.Path:  # torchmonarch's name
    """monarch's per-user directory, `$MONARCH_HOME` or else `~/.monarch`, joined with
    `subdir_paths`; the directory is created when missing and returned."""
    root = os.environ.get("MONARCH_HOME") or str(pathlib.Path.home() / ".monarch")
    path = pathlib.Path(root).joinpath(*subdir_paths)
    path.mkdir(parents=True, exist_ok=True)
    return path


class conda:  # torchmonarch's name: a namespace of functions
    """The conda environment this process runs in, read from `$CONDA_PREFIX`."""

    @staticmethod
    def active_env_dir() -> str | None:
        """The active environment's directory, or None outside conda."""
        return os.environ.get("CONDA_PREFIX") or None

    @staticmethod
    def active_env_name() -> str | None:
        """The active environment's name (the last part of its directory), or None."""
        prefix = conda.active_env_dir()
        return os.path.basename(prefix.rstrip(os.sep)) if prefix else None
