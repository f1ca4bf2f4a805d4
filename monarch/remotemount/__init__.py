"""Mount a local directory read-only on every host of a mesh (torchmonarch's
`monarch.remotemount`). `job.remote_mount(...)` does the same declaratively, at `state()`."""

from monarch.remotemount.remotemount import remotemount

__all__ = ["remotemount"]
