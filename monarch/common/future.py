"""`Future`: what `fetch_shard` and the tensor engine's requests return (as `monarch` exports
it)."""

from monarch._src.runtime.future import Future

__all__ = ["Future"]
