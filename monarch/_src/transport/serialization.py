"""Message payloads to pickle frames and back: `dumps`, `loads`, `frames_nbytes`.

Design. Payloads are pickled with protocol 5 and a `buffer_callback`, so a large contiguous buffer
(a numpy array, a torch tensor's storage, a big `bytes`, `bytearray` or `memoryview`) leaves as a
separate out-of-band frame that still points at the sender's memory: nothing is copied before the
socket. Buffers under the `small_write_threshold` config key (default `INBAND_LIMIT`, 64 KiB)
stay inside the pickle stream, because for small data one frame is cheaper than two.

One pickler class does everything. It subclasses `cloudpickle.Pickler`, whose `reducer_override`
pickles by value exactly the functions and classes that a receiver could not import by name
(defined in `__main__`, i.e. a script or a notebook cell, lambdas, closures, local classes) and
leaves every importable one to plain pickle's by-name reference. An extension class that claims
module `builtins` without being there (PyO3's default) goes by name too, from the module that
holds it (`_home_of_misplaced`): a copy by value would arrive without its native methods. The C
pickler never calls `reducer_override` for None, bools, ints, floats, str, bytes, bytearray, tuples,
lists, dicts and sets, so a message made of builtins runs no Python code; one pickler is reused per
thread, so a small message costs about a microsecond more than `pickle.dumps`. Large `bytes` and
`bytearray` objects, which no hook sees, are moved out-of-band after the fact (see `_splice`).

Torch tensors go through `torch_reduce`, which needs no numpy. Its reducer is registered only once
torch is in `sys.modules`, so importing this module imports neither torch nor numpy.

Rejected alternatives. `cloudpickle.dumps` for everything costs about eight times `pickle.dumps`
on a small message, because it builds a pickler per call. Plain pickle first with cloudpickle on
failure does not work: plain pickle happily writes a `__main__` class by name, which fails only
later, on the receiver. Torch's own tensor pickling copies each storage through `torch.save` into
in-band bytes, and Dask's tensor serializer goes through numpy.

Receiving. `loads` may keep the buffers it is given: a writable buffer (a `bytearray` or writable
memoryview) becomes the memory of the numpy array, tensor or bytearray built from it, so the caller
must not reuse it. A read-only buffer (`bytes`, a read-only memoryview) yields a read-only numpy
array, because numpy supports those; a tensor or bytearray built from one is a copy, because torch
has no read-only tensors. A `bytes` object is a copy of its buffer unless that buffer is `bytes`.
"""

from __future__ import annotations

import builtins
import contextlib
import copyreg
import importlib
import pickle
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FunctionType
from typing import Any, Final

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

from monarch._src.config import get as config_get
from monarch._src.transport import torch_reduce

__all__ = ["INBAND_LIMIT", "all_atoms", "dumps", "frames_nbytes", "loads"]

# Buffers of fewer bytes than this are pickled in-band; larger ones become out-of-band frames.
INBAND_LIMIT: Final = 64 * 1024

# memoryview formats that `memoryview.cast` can restore on the receiver.
_CASTABLE_FORMATS: Final = frozenset("bBhHiIlLqQnNfd?cP")

# Marks "no object seen yet"; None cannot, since None is a value one could fail to pickle near.
_NOTHING: Final = object()


class _Sink:
    """The file a pickler writes to: it collects the chunks of one message."""

    __slots__ = ("write",)

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self.write = write


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    """A protocol-5 cloudpickle pickler that keeps its state between messages on one thread.

    Between two `dump` calls (after `reset`) every per-message field is empty.
    """

    # cloudpickle's own table is a ChainMap over copyreg's, and every miss in it costs a Python
    # exception: about a microsecond per object of a user class. Its entries live in _REDUCERS
    # instead, consulted by `reducer_override` before this table.
    dispatch_table = copyreg.dispatch_table

    def __init__(self) -> None:
        # What the C pickler wrote for the current message: its own output chunks, alternating
        # with large bytes-like payloads that it writes straight through (see `_splice`).
        self._chunks: list[Any] = []
        super().__init__(_Sink(self._chunks.append), protocol=5, buffer_callback=self._keep)
        # Out-of-band frames of the current message, in the order pickle refers to them.
        self.out_of_band: list[memoryview | pickle.PickleBuffer] = []
        # For each out-of-band frame, how many chunks were written when pickle reached it.
        self.out_of_band_at: list[int] = []
        # Storages already framed in the current message, so a shared storage is sent once.
        self.storages: dict[tuple[int, int], torch_reduce.StorageFrame] = {}
        # The latest object pickle asked about: the likely culprit when pickling fails.
        self.last_seen: object = _NOTHING
        # True while a `dump` runs; a re-entrant `dumps` (from a `__reduce__`) builds a new pickler.
        self.busy = False

    def _keep(self, buffer: pickle.PickleBuffer) -> bool:
        raw = buffer.raw()
        if raw.nbytes < config_get("small_write_threshold"):
            return True
        self.out_of_band.append(raw)
        self.out_of_band_at.append(len(self._chunks))
        return False

    def reducer_override(self, obj: Any) -> Any:
        self.last_seen = obj
        reducer = _REDUCERS.get(type(obj))
        if reducer is not None:
            return reducer(self, obj)
        if not isinstance(obj, (type, FunctionType)):
            return NotImplemented
        try:
            if obj in _BY_NAME:
                return NotImplemented
        except TypeError:  # a class whose metaclass makes it unhashable
            return super().reducer_override(obj)
        home = _HOMES.get(obj) if isinstance(obj, type) else None
        if home is None and isinstance(obj, type):
            home = _home_of_misplaced(obj)
        if home is not None:
            _HOMES[obj] = home
            return _import_attribute, home
        reduced = super().reducer_override(obj)
        if reduced is NotImplemented:
            _BY_NAME.add(obj)
        return reduced

    def take(self) -> tuple[bytes, list[memoryview | pickle.PickleBuffer]]:
        chunks = self._chunks
        if len(chunks) == 1:
            return chunks[0], self.out_of_band
        return _splice(chunks, self.out_of_band, self.out_of_band_at)

    def reset(self) -> None:
        # Emptiness tests first: this runs after every message, and most messages are small.
        self._chunks.clear()
        if self.out_of_band:
            self.out_of_band = []
            self.out_of_band_at = []
        if self.storages:
            self.storages.clear()
        if self.globals_ref:
            self.globals_ref.clear()
        self.last_seen = _NOTHING
        self.clear_memo()


# Classes and functions that cloudpickle chose to pickle by name, remembered because its check
# costs microseconds per message. Such objects live in an importable module, which keeps them
# alive anyway. A module registered with `cloudpickle.register_pickle_by_value` after one of its
# objects was sent keeps going by name.
_BY_NAME: set[object] = set()

# Extension classes that claim module `builtins`, by the module they were found in: see
# `_home_of_misplaced`.
_HOMES: dict[type, tuple[str, str]] = {}

_local = threading.local()


def _home_of_misplaced(cls: type) -> tuple[str, str] | None:
    """Where to import `cls` from, when it says module `builtins` but is not there.

    PyO3 classes (torchft's `LighthouseServer`, for one) report `builtins` unless their author
    named a module. Plain pickle cannot find them by name, and cloudpickle would copy them by
    value, which loses their native methods: the receiver's copy has none. Such a class lives in
    whichever imported module holds it under its name; the first by name is its home, never the
    script (`__main__` is another module in the receiver).
    """
    if cls.__module__ != "builtins" or getattr(builtins, cls.__qualname__, None) is cls:
        return None
    main = sys.modules.get("__main__")  # also under other names (multiprocessing's __mp_main__)
    for name, module in sorted(sys.modules.copy().items(), key=lambda item: item[0]):
        # vars(), not getattr: a module's __getattr__ may import or warn.
        if module is not None and module is not main and vars(module).get(cls.__name__) is cls:
            return name, cls.__name__
    return None


def _import_attribute(module: str, name: str) -> Any:
    """The receiving side of `_home_of_misplaced`."""
    return getattr(importlib.import_module(module), name)


@contextlib.contextmanager
def by_value(module_name: str) -> Iterator[None]:
    """Within the block, objects of module `module_name` are pickled by value (their code
    travels), as `__main__`'s always are: how a class edited and reloaded in the sender reaches
    receivers that imported the old one. No effect for `__main__` or a module not imported."""
    module = sys.modules.get(module_name)
    if module is None or module_name == "__main__" or (
            module_name in cloudpickle.list_registry_pickle_by_value()):
        yield
        return
    cloudpickle.register_pickle_by_value(module)
    try:
        yield
    finally:
        cloudpickle.unregister_pickle_by_value(module)


_ATOMS: Final = frozenset({int, float, str, bool, type(None)})


def all_atoms(items: tuple[Any, ...]) -> bool:
    """Whether every item is an int, float, str, bool or None (what plain pickle writes as the
    pickler would, with nothing out of band)."""
    for item in items:
        if type(item) not in _ATOMS:
            return False
    return True


def _plain(obj: Any, depth: int = 0) -> bool:
    """Whether `obj` is a small tree of builtins that the pickler pickles exactly as plain
    pickle does (no hook runs, no out-of-band buffer): ints, floats, strs, bools, None and short
    bytes, in tuples, lists and str-keyed dicts of at most 16 items, 4 levels deep."""
    kind = type(obj)
    if kind in _ATOMS:
        return True
    if kind is tuple or kind is list:
        if depth > 3 or len(obj) > 16:
            return False
        for item in obj:
            if type(item) not in _ATOMS and not _plain(item, depth + 1):
                return False
        return True
    if kind is dict:
        if depth > 3 or len(obj) > 16:
            return False
        for key, item in obj.items():
            if type(key) is not str or (type(item) not in _ATOMS and not _plain(item, depth + 1)):
                return False
        return True
    return kind is bytes and len(obj) < 1024 <= config_get("small_write_threshold")


def dumps(obj: Any) -> tuple[bytes, list[memoryview | pickle.PickleBuffer]]:
    """Pickle `obj` into one in-band frame and a list of out-of-band buffers.

    Every buffer is a flat byte memoryview over the sender's memory: keep `obj` unchanged until
    the buffers are sent. A failure raises the original exception, with a note naming the type of
    the object that could not be pickled. A small message of builtins (most call arguments and
    replies) takes plain `pickle.dumps`, which writes the same bytes for it in a third of the time.
    """
    if _plain(obj):
        return pickle.dumps(obj, 5), []
    if _torch_pending and "torch" in sys.modules:
        _register_torch()
    cached: _Pickler | None = getattr(_local, "pickler", None)
    if cached is None:
        pickler = _local.pickler = _Pickler()
    elif cached.busy:
        pickler = _Pickler()
    else:
        pickler = cached
    pickler.busy = True
    try:
        pickler.dump(obj)
        return pickler.take()
    except Exception as exc:
        culprit = obj if pickler.last_seen is _NOTHING else pickler.last_seen
        _add_note(exc, _failure_note(culprit))
        # A pickler that failed halfway is not trusted with the next message.
        if getattr(_local, "pickler", None) is pickler:
            _local.pickler = None
        raise
    finally:
        pickler.reset()
        pickler.busy = False


def loads(
    data: bytes | bytearray | memoryview,
    buffers: Sequence[memoryview | bytes | bytearray | pickle.PickleBuffer] = (),
) -> Any:
    """Rebuild the object that `dumps` pickled into `data` and `buffers`.

    Writable buffers may become the memory of the rebuilt arrays, tensors and bytearrays; see
    the module docstring.
    """
    return pickle.loads(data, buffers=buffers)


def frames_nbytes(
    data: bytes | bytearray | memoryview,
    buffers: Sequence[memoryview | bytes | bytearray | pickle.PickleBuffer],
) -> int:
    """Return the total size in bytes of a pickled message and its out-of-band buffers."""
    return memoryview(data).nbytes + sum(memoryview(buffer).nbytes for buffer in buffers)


def _failure_note(culprit: object) -> str:
    if isinstance(culprit, type):
        what = f"the class {_qualified_name(culprit)}"
    elif isinstance(culprit, FunctionType):
        what = f"the function {_qualified_name(culprit)}"
    else:
        what = f"an object of type {_qualified_name(type(culprit))}"
    return f"Monarch could not pickle {what}."


def _qualified_name(obj: type | FunctionType) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _add_note(exc: BaseException, note: str) -> None:
    add_note: Callable[[str], None] | None = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note(note)
    else:  # Python 3.10 has no add_note; the attribute is what 3.11 reads.
        exc.__notes__ = [*getattr(exc, "__notes__", ()), note]  # type: ignore[attr-defined]


def _rebuild_bytearray(buffer: Any) -> bytearray:
    # Spliced streams name this function (see _BYTEARRAY_CALL): keep its module and name.
    if type(buffer) is bytearray:
        return buffer
    return bytearray(buffer)


# Large `bytes` and `bytearray` objects never reach `reducer_override`: the C pickler serializes
# them before consulting it. It does, however, write any payload of 64 KiB or more straight to
# the file as the object itself, right after a chunk that ends with the payload's unframed header
# opcode. `_splice` replaces that header with a call of a rebuild function on the next out-of-band
# buffer and sends the payload out-of-band, so these objects travel without a copy too.
def _next_buffer_call(module: str, name: str) -> bytes:
    return b"".join(
        (
            pickle.SHORT_BINUNICODE + bytes([len(module)]) + module.encode(),
            pickle.SHORT_BINUNICODE + bytes([len(name)]) + name.encode(),
            pickle.STACK_GLOBAL,
            pickle.NEXT_BUFFER,
            pickle.TUPLE1,
            pickle.REDUCE,
        )
    )


_BYTES_CALL: Final = _next_buffer_call("builtins", "bytes")
_BYTEARRAY_CALL: Final = _next_buffer_call(__name__, "_rebuild_bytearray")


def _payload_header(prefix: bytes, payload: object) -> tuple[int, bytes] | None:
    """Return (header length, replacement) if `prefix` ends with the header of `payload`."""
    if type(payload) is bytearray:
        header = pickle.BYTEARRAY8 + len(payload).to_bytes(8, "little")
        return (len(header), _BYTEARRAY_CALL) if prefix.endswith(header) else None
    if type(payload) is bytes:
        size = len(payload)
        if size <= 0xFFFFFFFF:
            header = pickle.BINBYTES + size.to_bytes(4, "little")
        else:
            header = pickle.BINBYTES8 + size.to_bytes(8, "little")
        return (len(header), _BYTES_CALL) if prefix.endswith(header) else None
    return None


def _splice(
    chunks: list[Any],
    buffers: list[memoryview | pickle.PickleBuffer],
    positions: list[int],
) -> tuple[bytes, list[memoryview | pickle.PickleBuffer]]:
    """Join the chunks of one message, moving large bytes-like payloads out-of-band.

    Pickle numbers out-of-band buffers by their order in the stream, so a moved payload is
    placed after every buffer that `positions` shows was reached in an earlier chunk.
    """
    stream: list[Any] = [chunks[0]]
    out: list[memoryview | pickle.PickleBuffer] = []
    placed = 0
    for index in range(1, len(chunks)):
        chunk = chunks[index]
        # The pickler's own chunks sit at even indices, payloads written through at odd ones.
        found = _payload_header(stream[-1], chunk) if index % 2 else None
        if found is None:
            stream.append(chunk)
            continue
        header_length, call = found
        stream[-1] = memoryview(stream[-1])[:-header_length]
        stream.append(call)
        while placed < len(buffers) and positions[placed] < index:
            out.append(buffers[placed])
            placed += 1
        out.append(memoryview(chunk))
    out.extend(buffers[placed:])
    return b"".join(stream), out


def _reduce_memoryview(pickler: _Pickler, obj: memoryview) -> Any:
    fmt = obj.format.removeprefix("@")
    shape: tuple[int, ...]
    if fmt in _CASTABLE_FORMATS:
        shape = obj.shape or ()
    else:  # e.g. numpy record formats: the receiver gets the raw bytes.
        fmt, shape = "B", (obj.nbytes,)
    payload = obj if obj.c_contiguous else obj.tobytes()
    return (_rebuild_memoryview, (pickle.PickleBuffer(payload), fmt, shape, obj.readonly))


def _rebuild_memoryview(
    buffer: Any, fmt: str, shape: tuple[int, ...], readonly: bool
) -> memoryview:
    view = memoryview(buffer)
    if view.readonly and not readonly:
        view = memoryview(bytearray(view))
    elif readonly and not view.readonly:
        view = view.toreadonly()
    view = view.cast("B")
    if fmt == "B" and len(shape) == 1:
        return view
    # typeshed types `cast` by literal formats; `fmt` was checked against _CASTABLE_FORMATS.
    return view.cast(fmt, shape)  # type: ignore[call-overload,no-any-return]


def _reduce_tensor(pickler: _Pickler, obj: Any) -> Any:
    return torch_reduce.reduce_tensor(obj, pickler.storages)


def _reduce_storage_frame(pickler: _Pickler, obj: torch_reduce.StorageFrame) -> Any:
    return obj.__reduce__()


def _adapt(reducer: Callable[[Any], Any]) -> Callable[[_Pickler, Any], Any]:
    return lambda pickler, obj: reducer(obj)


# Reducers by exact type, consulted before copyreg's: cloudpickle's (those that differ from
# copyreg's), then ours, which win. Torch types join once torch is imported.
_REDUCERS: dict[type, Callable[[_Pickler, Any], Any]] = {
    cls: _adapt(reducer)
    for cls, reducer in cloudpickle.Pickler.dispatch_table.items()
    if copyreg.dispatch_table.get(cls) is not reducer
}
_REDUCERS[memoryview] = _reduce_memoryview
_REDUCERS[torch_reduce.StorageFrame] = _reduce_storage_frame

# True until the torch reducers are registered.
_torch_pending = True


def _register_torch() -> None:
    global _torch_pending
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None)
    parameter_type = getattr(getattr(torch, "nn", None), "Parameter", None)
    if tensor_type is None or parameter_type is None:
        return  # torch is blocked, or another thread is still importing it: look again later.
    _REDUCERS[tensor_type] = _reduce_tensor
    _REDUCERS[parameter_type] = _reduce_tensor
    _torch_pending = False
