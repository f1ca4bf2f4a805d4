"""torchmonarch's `monarch._src.actor.concurrent`: `concurrent_endpoint`."""

from monarch.actor import concurrent_endpoint

__all__ = ["concurrent_endpoint"]
