"""Zero-copy pickling of torch tensors without numpy.

A dense CPU tensor travels as its storage bytes plus the metadata to view them again (dtype name,
size, stride, storage offset, requires_grad). The bytes leave as a `pickle.PickleBuffer` over the
storage's own memory, so the serializer can send them out-of-band without a copy; the receiver
wraps the frame it got with `torch.frombuffer` and views it with `Tensor.set_`.

Storages, not tensors, are the unit of transfer, as in `torch.save`: two tensors of one message
that share a storage arrive sharing one storage, with their offsets and strides intact. A tensor
that views a small part of a large storage (`batch[3]`) would drag the whole storage along, so
such a tensor is first copied compactly (`clone`), which loses only its storage offset.

Tensors not on the CPU are copied to it and arrive as CPU tensors. Layouts this module does not
handle (sparse, quantized, nested, meta) make `reduce_tensor` return `NotImplemented`, so torch's
own pickling applies.

This module never imports torch at import time: the serializer calls it only once torch is in
`sys.modules`, and the rebuild functions import it on the receiver, where a tensor has arrived.
"""

from __future__ import annotations

import ctypes
import pickle
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["StorageFrame", "rebuild_storage", "rebuild_tensor", "reduce_tensor"]

# A tensor viewing less than 1/_COMPACT_RATIO of its storage is cloned before sending; below
# _COMPACT_MIN_BYTES the whole storage is cheap enough to send as is.
_COMPACT_RATIO = 2
_COMPACT_MIN_BYTES = 64 * 1024

# Received frames may be slices of a larger message at any offset; torch kernels expect element
# alignment, and 16 bytes covers every dtype (complex128 included).
_ALIGNMENT = 16


class _Window(ctypes.Array[ctypes.c_ubyte]):
    """A ctypes byte array type as long as any address space, laid over a storage's memory.

    `memoryview(window)[:n]` exposes exactly n bytes with no copy. One fixed type serves all
    sizes because ctypes caches every array type it creates forever, one per length.
    """

    _type_ = ctypes.c_ubyte
    _length_ = 1 << 47
    # The storage whose memory this window lies over: it lives as long as any view of the window.
    owner: object


class StorageFrame:
    """The bytes of one untyped storage, pickled as a `PickleBuffer` over the storage's memory.

    One frame is made per storage per message, so pickle's memo sends a shared storage once.
    """

    __slots__ = ("storage",)

    def __init__(self, storage: torch.UntypedStorage) -> None:
        # A CPU storage; it stays alive while this frame or any buffer made from it lives.
        self.storage = storage

    def __reduce__(self) -> tuple[Any, ...]:
        return (rebuild_storage, (_storage_buffer(self.storage),))


def _storage_buffer(storage: torch.UntypedStorage) -> pickle.PickleBuffer | bytes:
    nbytes = storage.nbytes()
    if nbytes == 0:
        return b""
    window = _Window.from_address(storage.data_ptr())
    window.owner = storage
    return pickle.PickleBuffer(memoryview(window)[:nbytes])


def reduce_tensor(tensor: torch.Tensor, storages: dict[tuple[int, int], StorageFrame]) -> object:
    """Return a pickle reduce tuple for `tensor`, or `NotImplemented` for torch's own pickling.

    `storages` maps (data pointer, byte length) to the frame already made for that storage in
    the current message; the caller clears it after each message.
    """
    import torch

    if torch._C._len_torch_dispatch_stack():
        # A dispatch mode on this thread (a mesh's `activate()`, say) would take the reads
        # below for its own ops: `detach` would return its tensor, not a view of this one's
        # memory. The bytes are the local tensor's, so read them with the modes out of the way.
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            return reduce_tensor(tensor, storages)
    if (
        tensor.layout != torch.strided
        or tensor.is_quantized
        or tensor.is_nested
        or tensor.device.type == "meta"
    ):
        return NotImplemented
    requires_grad = tensor.requires_grad
    data = tensor.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    # Lazy conjugate and negative views share memory with a differently valued tensor.
    data = data.resolve_conj().resolve_neg()
    storage = data.untyped_storage()
    viewed_bytes = data.numel() * data.element_size()
    if storage.nbytes() > max(_COMPACT_RATIO * viewed_bytes, _COMPACT_MIN_BYTES):
        data = data.clone(memory_format=torch.preserve_format)
        storage = data.untyped_storage()
    key = (storage.data_ptr(), storage.nbytes())
    frame = storages.get(key)
    if frame is None:
        frame = storages[key] = StorageFrame(storage)
    as_parameter = isinstance(tensor, torch.nn.Parameter)
    attributes = dict(tensor.__dict__) or None
    return (
        rebuild_tensor,
        (
            frame,
            str(data.dtype).removeprefix("torch."),
            tuple(data.size()),
            data.stride(),
            data.storage_offset(),
            requires_grad,
            as_parameter,
            attributes,
        ),
    )


def rebuild_storage(buffer: Any) -> torch.UntypedStorage:
    """Wrap a received frame as an untyped storage, without a copy when the frame is writable.

    A read-only frame (`bytes`, a read-only memoryview) is copied: torch has no read-only tensors,
    `torch.frombuffer` warns on such a buffer, and writes through the tensor would corrupt it.
    """
    import torch

    view = memoryview(buffer)
    if view.nbytes == 0:
        return torch.empty((0,), dtype=torch.uint8).untyped_storage()
    if view.readonly:
        buffer = bytearray(view)
    flat = torch.frombuffer(buffer, dtype=torch.uint8)
    if flat.data_ptr() % _ALIGNMENT:
        flat = flat.clone()
    return flat.untyped_storage()


def rebuild_tensor(
    storage: torch.UntypedStorage,
    dtype_name: str,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    storage_offset: int,
    requires_grad: bool,
    as_parameter: bool,
    attributes: dict[str, Any] | None,
) -> torch.Tensor:
    """View `storage` as the tensor `reduce_tensor` described."""
    import torch

    dtype = getattr(torch, dtype_name)
    tensor = torch.empty((0,), dtype=dtype).set_(storage, storage_offset, size, stride)
    if as_parameter:
        tensor = torch.nn.Parameter(tensor, requires_grad=requires_grad)
    elif requires_grad:
        tensor.requires_grad_(True)
    if attributes:
        tensor.__dict__.update(attributes)
    return tensor
