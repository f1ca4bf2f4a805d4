"""torchmonarch's `monarch._src.gather_mount.gather_mount`: re-exports of
`monarch._src.mount.gather` under the path code written for Monarch imports."""

from monarch._src.mount.gather import (
    NOTIFY_BATCH_S as _NOTIFY_BATCH_S,
    GatherFS,
    GatherMount,
    GatherSource,
    gather_mount,
)
from monarch._src.mount.layout import point_key as _point_to_key

__all__ = ["_NOTIFY_BATCH_S", "GatherFS", "GatherMount", "GatherSource", "_point_to_key",
           "gather_mount"]
