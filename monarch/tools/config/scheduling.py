"""`Config`: torchmonarch's scheduling config (`monarch.tools.config.Config`).

It names a scheduler, its arguments and the workspace to ship. Here jobs are `monarch.job`
objects (`SlurmJob`, `ProcessJob`, ...) and `monarch apply` takes those, so `Config` is a record
that code written for Monarch can still build and read (its `workspace` is what
`HostMesh.sync_workspace` takes). `appdef` (a TorchX `AppDef`) is kept as given: TorchX is not
used here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from monarch.tools.config.workspace import Workspace

__all__ = ["Config"]

NOT_SET = "__NOT_SET__"


@dataclasses.dataclass
class Config:
    """A scheduler name, its arguments, the workspace to mirror, dry-run, and the job spec."""

    scheduler: str = NOT_SET
    scheduler_args: dict[str, Any] = dataclasses.field(default_factory=dict)
    workspace: Workspace = dataclasses.field(default_factory=Workspace.null)
    dryrun: bool = False
    appdef: Any = None
