"""torchmonarch's `monarch._src.actor.supervision`: `MeshFailure` and the client's fault hook."""

from monarch._src.supervision.errors import MeshFailure
from monarch.actor import unhandled_fault_hook

__all__ = ["MeshFailure", "unhandled_fault_hook"]
