"""torchmonarch's `monarch.simulator.ir`: the IR graph of a simulated program (control DAG of
commands, data DAG of tensor events) and its exports. See `monarch._src.simulator.ir`."""

from monarch._src.simulator.ir import (
    BorrowInfo,
    Command,
    DataEvent,
    IRGraph,
    SendTensorInfo,
    StorageCreationEvent,
    StorageDeletionEvent,
    TensorAccessEvent,
    TensorCreationEvent,
    TensorDeletionEvent,
    TensorInfo,
    TensorMutationEvent,
)

__all__ = [
    "BorrowInfo",
    "Command",
    "DataEvent",
    "IRGraph",
    "SendTensorInfo",
    "StorageCreationEvent",
    "StorageDeletionEvent",
    "TensorAccessEvent",
    "TensorCreationEvent",
    "TensorDeletionEvent",
    "TensorInfo",
    "TensorMutationEvent",
]
