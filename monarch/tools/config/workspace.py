"""`Workspace`: local project directories to mirror on the hosts of a job.

`HostMesh.sync_workspace(Workspace(dirs=[...]))` copies each directory to
`$WORKSPACE_DIR/<name>` on every host (content-hashed: only changed files travel; see
`monarch._src.job.workspace`). `WORKSPACE_DIR` is read on the host; where it is unset, hosts
use `~/.monarch/workspace`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from monarch.tools.config.environment import CondaEnvironment, Environment

__all__ = ["ACTIVE_CONDA_ENV", "Workspace"]

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
