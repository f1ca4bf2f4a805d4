"""torchmonarch's `monarch_hyperactor.handle`: `Handle` and `WouldBlockRuntime`
(`monarch._src.runtime.handle`)."""

from monarch._src.runtime.handle import (
    Handle,
    WouldBlockRuntime,
    in_runtime_thread,
    mark_runtime_thread,
    new_handle_pair,
)

# torchmonarch's name for a (Handle, completer) pair whose completer the caller keeps.
_new_handle_pair = new_handle_pair

__all__ = ["Handle", "WouldBlockRuntime", "_new_handle_pair", "in_runtime_thread",
           "mark_runtime_thread"]
