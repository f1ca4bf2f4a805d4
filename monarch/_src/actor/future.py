"""torchmonarch's `monarch._src.actor.future`: the actor `Future`."""

from monarch._src.runtime.future import Future

__all__ = ["Future"]
