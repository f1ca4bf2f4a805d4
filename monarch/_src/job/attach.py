"""Attaching to a job's workers.

`attach_to_workers` leaves workers it did not start running when this client exits (only this
client's procs stop), so `monarch exec` can attach, run and exit, and the next command attaches
again. `JobTrait.kill()` shuts the workers down for good through `HostMesh.shutdown()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["attach_job_workers"]


def attach_job_workers(workers: Sequence[str], name: str) -> Any:
    """A host mesh over `workers` (dimension `hosts`) named after the job's mesh."""
    from monarch._src.hosts.remote import attach_to_workers

    return attach_to_workers(ca="trust_all_connections", workers=list(workers), name=name)
