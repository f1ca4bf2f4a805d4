"""`Stream` and `get_active_stream`, the tensor engine's streams (as `monarch` exports them)."""

from monarch._src.tensor.stream import Stream, get_active_stream

__all__ = ["Stream", "get_active_stream"]
