"""Mount every host's directory of a mesh read-only under one local directory (torchmonarch's
`monarch.gather_mount`). `job.gather_mount(...)` does the same declaratively, at `state()`."""

from monarch._src.mount.gather import GatherMount, gather_mount

__all__ = ["GatherMount", "gather_mount"]
