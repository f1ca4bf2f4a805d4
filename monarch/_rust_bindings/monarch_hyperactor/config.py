"""torchmonarch's `monarch_hyperactor.config`: the `Encoding` enum (`monarch.config`'s)."""

from monarch.config import Encoding

__all__ = ["Encoding"]
