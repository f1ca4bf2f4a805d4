"""torchmonarch's `monarch._src.actor.source_loader`: the root client's source for code pickled
by value, which paused actors' pdb shows (`monarch._src.debug.source`)."""

from monarch._src.debug.source import SourceLoaderController, load_remote_source

__all__ = ["SourceLoaderController", "load_remote_source"]
