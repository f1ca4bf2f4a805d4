"""torchmonarch's `monarch.fetch`: reading distributed tensors' values on the controller
(as `monarch` exports them)."""

from monarch._src.tensor.fetch import fetch_shard, inspect, show
from monarch._src.tensor.remote import call_on_shard_and_fetch

__all__ = ["call_on_shard_and_fetch", "fetch_shard", "inspect", "show"]
