"""torchmonarch's `monarch_hyperactor.pympsc`: the mpsc channel's binding names
(`Receiver`, `PyTestSender`, `channel_for_test`) over `monarch._src.runtime.mpsc`."""

from monarch._src.runtime.mpsc import Receiver, Sender as PyTestSender, channel as channel_for_test

__all__ = ["PyTestSender", "Receiver", "channel_for_test"]
