"""`Selection`, a parsed selection expression (as `monarch` exports it)."""

from monarch._src.shape.selection import Selection

__all__ = ["Selection"]
