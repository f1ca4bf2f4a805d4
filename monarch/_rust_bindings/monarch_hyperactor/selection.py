"""torchmonarch's `monarch_hyperactor.selection`: `Selection`, a parsed selection expression
(`monarch._src.shape.selection`)."""

from monarch._src.shape.selection import Selection

__all__ = ["Selection"]
