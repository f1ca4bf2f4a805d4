"""torchmonarch's `monarch_hyperactor.pytokio`: `PythonTask` and `Shared`
(`monarch._src.runtime.pytokio`)."""

from monarch._src.runtime.pytokio import (
    Handle,
    PythonTask,
    Shared,
    WouldBlockRuntime,
    is_tokio_thread,
)

__all__ = ["Handle", "PythonTask", "Shared", "WouldBlockRuntime", "is_tokio_thread"]
