"""`remote` and `call_on_shard_and_fetch` (as `monarch` exports them)."""

from monarch._src.tensor.remote import call_on_shard_and_fetch, remote

__all__ = ["call_on_shard_and_fetch", "remote"]
