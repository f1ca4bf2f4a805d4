"""`Workspace`: local project directories to mirror on the hosts of a job.

`HostMesh.sync_workspace(Workspace(dirs=[...]))` copies each directory to
`$WORKSPACE_DIR/<name>` on every host (content-hashed: only changed files travel; see
`monarch._src.job.workspace`). `WORKSPACE_DIR` is read on the host; where it is unset, hosts
use `~/.monarch/workspace`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from monarch._src.mesh import hooks
from monarch.tools.config.environment import CondaEnvironment, Environment

__all__ = ["ACTIVE_CONDA_ENV", "Workspace", "sync_host_mesh"]

ACTIVE_CONDA_ENV = CondaEnvironment()


class Workspace:
    """Directories to mirror: a list (each lands under its own name) or a dict mapping each
    local directory to its path relative to the workspace root; `env` is the environment the
    projects run with (the active conda env by default; `Workspace.null()` has none)."""

    def __init__(
        self,
        dirs: list[Path | str] | dict[Path | str, str] | None = None,
        env: Environment | None = ACTIVE_CONDA_ENV,
    ) -> None:
        self.env = env
        self.dirs: dict[Path, str] = {}  # local directory -> path under the workspace root
        if dirs is None:
            return
        if isinstance(dirs, (str, Path)):
            raise TypeError(
                f"Workspace(dirs=...) takes a list or dict of directories, not {dirs!r}; "
                f"write Workspace(dirs=[{str(dirs)!r}])."
            )
        items = dirs.items() if isinstance(dirs, dict) else ((d, None) for d in dirs)
        for src, dst in items:
            if not src:
                raise ValueError(
                    f"Workspace directory {src!r} is empty; that would mirror the current "
                    "directory by accident. Name the directory."
                )
            path = Path(src)
            self.dirs[path] = path.name if dst is None else dst

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and (self.env, self.dirs) == (other.env, other.dirs)

    def __hash__(self) -> int:
        return hash(tuple(self.dirs.items()))

    def merge(self, outdir: str | Path) -> None:
        """Copy every directory into `outdir` at its workspace path."""
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        for src, dst in self.dirs.items():
            shutil.copytree(src, out / dst, dirs_exist_ok=True)

    @staticmethod
    def null() -> Workspace:
        """A workspace with no directories and no environment."""
        return Workspace(env=None)

    def __repr__(self) -> str:
        dirs = {str(k): v for k, v in self.dirs.items()}
        return f"Workspace(dirs={dirs!r}, env={self.env!r})"


async def sync_host_mesh(host_mesh: Any, workspace: Any, conda: bool, auto_reload: bool) -> None:
    """`HostMesh.sync_workspace` (through the `workspace_sync` hook slot): check the arguments,
    then mirror each directory of `workspace` (and with `conda` its environment, or the active
    conda env or virtualenv, at the same path) on every host of `host_mesh`."""
    from monarch._src.job.workspace import HOST_WORKSPACE_DIR, sync_workspace

    if not isinstance(workspace, Workspace):
        raise TypeError(
            "HostMesh.sync_workspace takes a monarch.tools.config.Workspace, e.g. "
            f"Workspace(dirs=['./my_project']); got {type(workspace).__name__}."
        )
    if auto_reload:
        raise NotImplementedError(
            "HostMesh.sync_workspace(auto_reload=True) is not supported: running procs do "
            "not reload modules. Stop the proc mesh and spawn_procs() again after the sync "
            "so the new code is imported."
        )
    # The local paths are checked on a thread too: a stat may block (a network filesystem).
    jobs = await asyncio.to_thread(_sync_jobs, workspace, conda, HOST_WORKSPACE_DIR)
    for local, dest in jobs:
        await asyncio.to_thread(sync_workspace, host_mesh, local, dest)


def _sync_jobs(workspace: Workspace, conda: bool, host_dir: str) -> list[tuple[str, str]]:
    """(local directory, host destination) of each directory `sync_host_mesh` mirrors; raises
    NotADirectoryError for a workspace directory that does not exist."""
    jobs: list[tuple[str, str]] = []
    for src, dst in workspace.dirs.items():
        local = os.fspath(src)
        if not os.path.isdir(local):
            raise NotADirectoryError(
                f"Workspace directory {local!r} does not exist; pass existing directories."
            )
        jobs.append((local, f"{host_dir}/{dst}" if dst else host_dir))
    if conda:
        prefix = _environment_to_sync(workspace)
        real = os.path.realpath(prefix)
        jobs.append((real, real))
    return jobs


def _environment_to_sync(workspace: Workspace) -> str:
    """The environment `sync_workspace(conda=True)` mirrors: the workspace's conda prefix, else
    the active conda env or virtualenv; ValueError when there is none."""
    prefix = None
    if isinstance(workspace.env, CondaEnvironment):
        prefix = workspace.env._conda_prefix
    prefix = prefix or os.environ.get("CONDA_PREFIX") or os.environ.get("VIRTUAL_ENV")
    if not prefix:
        prefix = sys.prefix if sys.prefix != sys.base_prefix else None
    if not prefix:
        raise ValueError(
            "HostMesh.sync_workspace(conda=True) found no environment to sync: no conda "
            "env or virtualenv is active and the workspace names none. Activate one or "
            "pass Workspace(env=CondaEnvironment(conda_prefix=...))."
        )
    return prefix


# HostMesh.sync_workspace calls this through its hook slot; a Workspace exists only once this
# module is imported, so the slot is filled exactly when a valid call is possible.
hooks.workspace_sync.install(sync_host_mesh)
