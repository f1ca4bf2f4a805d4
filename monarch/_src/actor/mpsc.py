"""torchmonarch's `monarch._src.actor.mpsc`: the many-senders channel (`runtime/mpsc.py`)."""

from monarch._src.runtime.mpsc import Receiver, Sender, channel

__all__ = ["Receiver", "Sender", "channel"]
