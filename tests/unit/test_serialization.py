"""Unit tests for `monarch._src.transport.serialization` (and its torch reducer).

Everything runs in this process except three tests marked slow, which need a fresh interpreter:
the import check, torch with numpy blocked, and a `__main__` class loaded where it is undefined.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import runpy
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from monarch._src.transport import serialization
from monarch._src.transport.serialization import INBAND_LIMIT, dumps, frames_nbytes, loads

try:
    import torch
except ImportError:  # torch is an optional dependency
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

# Comfortably above INBAND_LIMIT, so payloads of this size go out-of-band.
LARGE = 4 * INBAND_LIMIT
SUBPROCESS_TIMEOUT = 60.0


def round_trip(obj: Any) -> Any:
    data, buffers = dumps(obj)
    return loads(data, buffers)


def round_trip_received(obj: Any) -> Any:
    """Round trip through fresh writable copies of every frame, as a socket read delivers them."""
    data, buffers = dumps(obj)
    return loads(bytes(data), [bytearray(buffer) for buffer in buffers])


def address_of(buffer: Any) -> int:
    """The address of the first byte of a writable buffer."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def run_python(code: str, stdin: bytes = b"") -> str:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        input=stdin,
        capture_output=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    return completed.stdout.decode()


# --- builtins -------------------------------------------------------------------------------

BUILTIN_VALUES = [
    None,
    True,
    0,
    -(2**70),
    3.25,
    "x",
    "snowman \N{SNOWMAN}",
    b"\x00\xff",
    (1, "x", None),
    [1, [2, [3]]],
    {"a": 1, 2: (3, 4.0), None: frozenset({1, 2})},
    {1, 2, 3},
]


@pytest.mark.parametrize("value", BUILTIN_VALUES, ids=repr)
def test_dumps_builtin_value_round_trips_equal(value: Any) -> None:
    data, buffers = dumps(value)
    assert buffers == []
    assert loads(data, buffers) == value


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text() | st.binary(max_size=64),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
            | st.tuples(children, children)
        ),
        max_leaves=20,
    )
)
@settings(max_examples=50, deadline=None)
def test_dumps_nested_builtins_round_trip_equal(value: Any) -> None:
    assert round_trip(value) == value


def test_dumps_small_tuple_matches_plain_pickle_bytes() -> None:
    data, buffers = dumps((1, "x", None))
    assert data == pickle.dumps((1, "x", None), protocol=5)
    assert buffers == []


def test_dumps_importable_function_goes_by_name_and_loads_the_same_object() -> None:
    data, _ = dumps(os.path.join)
    assert b"join" in data and len(data) < 100
    assert loads(data, []) is os.path.join


def test_dumps_custom_reduce_is_used() -> None:
    result = round_trip(ReducesToTuple(3))
    assert result == (3, "reduced")


def test_dumps_reentrant_call_from_reduce_round_trips() -> None:
    result = round_trip([NestedDumps((1, 2)), NestedDumps("y")])
    assert [item.value for item in result] == [(1, 2), "y"]


def test_dumps_many_threads_round_trip_their_own_messages() -> None:
    results: dict[int, Any] = {}
    barrier = threading.Barrier(8)

    def work(index: int) -> None:
        barrier.wait()
        results[index] = [round_trip((index, str(index), [index] * 10)) for _ in range(200)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert all(results[i] == [(i, str(i), [i] * 10)] * 200 for i in range(8))


def test_frames_nbytes_counts_data_and_buffers() -> None:
    array = np.zeros(LARGE, dtype=np.uint8)
    data, buffers = dumps((array, b"abc"))
    assert frames_nbytes(data, buffers) == len(data) + LARGE
    assert frames_nbytes(b"abcd", [b"xy", bytearray(3), memoryview(b"z")]) == 10


# --- bytes, bytearray, memoryview, str -------------------------------------------------------


def test_bytearray_large_goes_out_of_band_without_copy() -> None:
    payload = bytearray(os.urandom(LARGE))
    data, buffers = dumps({"payload": payload})
    assert len(buffers) == 1 and len(data) < 200
    assert address_of(buffers[0]) == address_of(payload)
    result = loads(data, buffers)["payload"]
    assert type(result) is bytearray and result == payload


def test_bytearray_received_as_bytearray_is_adopted_without_copy() -> None:
    payload = bytearray(os.urandom(LARGE))
    data, buffers = dumps(payload)
    received = [bytearray(buffer) for buffer in buffers]
    assert loads(data, received) is received[0]


def test_bytes_large_goes_out_of_band_and_arrives_as_bytes() -> None:
    payload = os.urandom(LARGE)
    data, buffers = dumps([payload, 1])
    assert len(buffers) == 1 and buffers[0].obj is payload
    result = loads(data, [bytearray(buffers[0])])
    assert type(result[0]) is bytes and result == [payload, 1]


def test_bytearray_small_stays_in_band() -> None:
    data, buffers = dumps(bytearray(b"abc"))
    assert buffers == []
    assert loads(data, buffers) == bytearray(b"abc")


def test_str_large_round_trips_in_band() -> None:
    text = "\N{SNOWMAN}" * LARGE
    data, buffers = dumps(text)
    assert buffers == []
    assert loads(data, buffers) == text


def test_memoryview_large_goes_out_of_band_with_format_and_shape() -> None:
    source = bytearray(os.urandom(LARGE))
    view = memoryview(source).cast("d", (LARGE // 64, 8))
    data, buffers = dumps(view)
    assert len(buffers) == 1 and address_of(buffers[0]) == address_of(source)
    result = loads(data, buffers)
    assert isinstance(result, memoryview)
    assert (result.format, result.shape, result.readonly) == ("d", (LARGE // 64, 8), False)
    assert result.tobytes() == bytes(source)


def test_memoryview_readonly_arrives_readonly() -> None:
    result = round_trip_received(memoryview(os.urandom(LARGE)))
    assert result.readonly


def test_memoryview_writable_from_readonly_frame_arrives_writable() -> None:
    data, buffers = dumps(memoryview(bytearray(LARGE)))
    result = loads(data, [bytes(buffer) for buffer in buffers])
    result[0] = 7
    assert not result.readonly and result[0] == 7


def test_memoryview_noncontiguous_round_trips_values() -> None:
    view = memoryview(bytearray(range(200)))[::3]
    result = round_trip(view)
    assert result.tolist() == view.tolist()


def test_mixed_large_payloads_keep_their_buffer_order() -> None:
    message = {
        "array": np.arange(LARGE, dtype=np.int32),
        "bytes": os.urandom(LARGE),
        "bytearray": bytearray(os.urandom(LARGE + 1)),
        "view": memoryview(bytearray(os.urandom(LARGE + 2))),
        "again": [np.ones(LARGE), b"small", os.urandom(LARGE + 3)],
    }
    data, buffers = dumps(message)
    assert len(buffers) == 6
    result = loads(data, [bytearray(buffer) for buffer in buffers])
    assert np.array_equal(result["array"], message["array"])
    assert result["bytes"] == message["bytes"]
    assert result["bytearray"] == message["bytearray"]
    assert result["view"] == message["view"]
    assert np.array_equal(result["again"][0], message["again"][0])
    assert result["again"][1:] == message["again"][1:]


# --- numpy ------------------------------------------------------------------------------------

NUMPY_DTYPES = ["float32", "float64", "float16", "int8", "uint16", "int64", "bool", "complex128"]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("count", [0, 7, LARGE])
def test_numpy_array_round_trips_equal(dtype: str, count: int) -> None:
    array = (np.arange(count) % 5).astype(dtype)
    result = round_trip_received(array)
    assert result.dtype == array.dtype and result.shape == array.shape
    assert np.array_equal(result, array)


def test_numpy_large_array_goes_out_of_band_sharing_memory() -> None:
    array = np.arange(LARGE, dtype=np.float64)
    data, buffers = dumps(array)
    assert len(buffers) >= 1
    assert np.shares_memory(np.frombuffer(buffers[0], dtype=np.uint8), array)
    assert np.array_equal(loads(data, buffers), array)


def test_numpy_small_array_stays_in_band() -> None:
    data, buffers = dumps(np.arange(10))
    assert buffers == []
    assert np.array_equal(loads(data, buffers), np.arange(10))


def test_numpy_writable_frame_becomes_array_memory() -> None:
    array = np.arange(LARGE, dtype=np.float64)
    data, buffers = dumps(array)
    received = bytearray(buffers[0])
    result = loads(data, [received])
    assert result.flags.writeable
    assert np.shares_memory(result, np.frombuffer(received, dtype=np.uint8))


def test_numpy_readonly_frame_gives_readonly_array() -> None:
    array = np.arange(LARGE, dtype=np.float64)
    data, buffers = dumps(array)
    result = loads(data, [bytes(buffer) for buffer in buffers])
    assert not result.flags.writeable and np.array_equal(result, array)


@pytest.mark.parametrize("layout", ["fortran", "transposed", "strided"])
def test_numpy_noncontiguous_array_round_trips_equal(layout: str) -> None:
    base = np.arange(LARGE, dtype=np.float32).reshape(-1, 64)
    array = {
        "fortran": np.asfortranarray(base),
        "transposed": base.T,
        "strided": base[::2, 1::3],
    }[layout]
    result = round_trip_received(array)
    assert np.array_equal(result, array)


# --- torch ------------------------------------------------------------------------------------

TORCH_DTYPES = [
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "complex64",
    "complex128",
]


def make_tensor(dtype_name: str, *shape: int) -> Any:
    dtype = getattr(torch, dtype_name)
    values = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape) % 7 - 3
    if dtype.is_complex:
        return torch.complex(values, -values).to(dtype)
    return values.to(dtype)


def assert_same_tensor(result: Any, expected: Any) -> None:
    assert type(result) is type(expected)
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    assert result.device.type == "cpu"
    assert torch.equal(result, expected)


@needs_torch
@pytest.mark.parametrize("dtype_name", TORCH_DTYPES)
@pytest.mark.parametrize("shape", [(3, 5), (LARGE // 4, 4)], ids=["small", "large"])
def test_torch_tensor_round_trips_equal(dtype_name: str, shape: tuple[int, int]) -> None:
    tensor = make_tensor(dtype_name, *shape)
    assert_same_tensor(round_trip(tensor), tensor)
    assert_same_tensor(round_trip_received(tensor), tensor)


@needs_torch
def test_torch_large_tensor_goes_out_of_band_sharing_memory() -> None:
    tensor = torch.rand(LARGE)
    data, buffers = dumps(tensor)
    assert len(buffers) == 1 and len(data) < 300
    assert address_of(buffers[0]) == tensor.data_ptr()
    assert buffers[0].nbytes == tensor.numel() * tensor.element_size()


@needs_torch
def test_torch_small_tensor_stays_in_band() -> None:
    data, buffers = dumps(torch.arange(10))
    assert buffers == []
    assert torch.equal(loads(data, buffers), torch.arange(10))


@needs_torch
def test_torch_writable_frame_becomes_tensor_memory() -> None:
    tensor = torch.rand(LARGE)
    data, buffers = dumps(tensor)
    received = bytearray(buffers[0])
    result = loads(data, [received])
    assert result.data_ptr() == address_of(received)
    assert torch.equal(result, tensor)


@needs_torch
def test_torch_misaligned_frame_is_realigned() -> None:
    tensor = make_tensor("complex128", LARGE // 16, 2)
    data, buffers = dumps(tensor)
    shifted = bytearray(buffers[0].nbytes + 1)
    shifted[1:] = buffers[0]
    result = loads(data, [memoryview(shifted)[1:]])
    assert result.data_ptr() % 16 == 0
    assert_same_tensor(result, tensor)


@needs_torch
def test_torch_metadata_objects_round_trip_equal() -> None:
    metadata = (torch.bfloat16, torch.device("cpu"), torch.Size([2, 3]))
    assert round_trip(metadata) == metadata


@needs_torch
def test_torch_readonly_frame_is_copied_without_warning() -> None:
    # Warnings are errors in this suite, so a frombuffer warning would fail the test.
    tensor = torch.rand(LARGE)
    data, buffers = dumps(tensor)
    frozen = bytes(buffers[0])
    result = loads(data, [frozen])
    result.zero_()
    assert frozen == bytes(buffers[0])
    assert not torch.equal(result, tensor)


@needs_torch
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16", "bool", "complex64"])
def test_torch_transposed_tensor_keeps_its_strides(dtype_name: str) -> None:
    tensor = make_tensor(dtype_name, 300, 200).t()
    result = round_trip_received(tensor)
    assert_same_tensor(result, tensor)
    assert result.stride() == tensor.stride()


@needs_torch
def test_torch_channels_last_tensor_keeps_its_memory_format() -> None:
    tensor = torch.rand(2, 3, 16, 16).to(memory_format=torch.channels_last)
    result = round_trip_received(tensor)
    assert_same_tensor(result, tensor)
    assert result.is_contiguous(memory_format=torch.channels_last)


@needs_torch
def test_torch_strided_slice_of_small_storage_round_trips_equal() -> None:
    tensor = make_tensor("float32", 20, 30)[::2, 1::3]
    result = round_trip_received(tensor)
    assert_same_tensor(result, tensor)
    assert result.storage_offset() == tensor.storage_offset()


@needs_torch
def test_torch_view_with_storage_offset_keeps_offset() -> None:
    base = torch.arange(1000.0)
    tensor = base[600:]
    result = round_trip_received(tensor)
    assert_same_tensor(result, tensor)
    assert result.storage_offset() == 600


@needs_torch
def test_torch_small_view_of_large_storage_sends_only_its_elements() -> None:
    base = torch.rand(LARGE, 4)
    tensor = base[5:7]
    data, buffers = dumps(tensor)
    assert frames_nbytes(data, buffers) < 1000
    result = loads(data, buffers)
    assert_same_tensor(result, tensor)


@needs_torch
def test_torch_views_of_one_storage_arrive_sharing_one_storage() -> None:
    base = torch.arange(LARGE, dtype=torch.float32)
    whole, part = base.view(-1, 4), base[8:]
    data, buffers = dumps((whole, part))
    assert len(buffers) == 1
    whole_result, part_result = loads(data, [bytearray(buffers[0])])
    part_result[0] = -1.0
    assert whole_result[2, 0] == -1.0
    assert part_result.storage_offset() == 8


@needs_torch
def test_torch_expanded_tensor_sends_only_its_storage() -> None:
    tensor = torch.rand(1000).expand(1000, 1000)
    data, buffers = dumps(tensor)
    assert frames_nbytes(data, buffers) < 8000
    result = loads(data, buffers)
    assert_same_tensor(result, tensor)
    assert result.stride() == (0, 1)


@needs_torch
def test_torch_zero_dim_tensor_round_trips_equal() -> None:
    for tensor in (torch.tensor(3.5), torch.tensor(True), torch.tensor(7, dtype=torch.int64)):
        result = round_trip(tensor)
        assert_same_tensor(result, tensor)
        assert result.dim() == 0


@needs_torch
@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0, 2)])
def test_torch_empty_tensor_round_trips_shape(shape: tuple[int, ...]) -> None:
    tensor = torch.empty(shape, dtype=torch.bfloat16)
    assert_same_tensor(round_trip_received(tensor), tensor)


@needs_torch
def test_torch_empty_view_of_large_storage_round_trips_empty() -> None:
    tensor = torch.rand(LARGE)[10:10]
    data, buffers = dumps(tensor)
    assert buffers == []
    assert_same_tensor(loads(data, buffers), tensor)


@needs_torch
def test_torch_requires_grad_leaf_arrives_requiring_grad() -> None:
    tensor = torch.rand(5, requires_grad=True)
    result = round_trip(tensor)
    assert result.requires_grad and result.is_leaf
    assert torch.equal(result.detach(), tensor.detach())


@needs_torch
def test_torch_non_leaf_tensor_arrives_as_leaf_requiring_grad() -> None:
    tensor = torch.rand(5, requires_grad=True) * 2
    result = round_trip(tensor)
    assert result.requires_grad and result.is_leaf and result.grad_fn is None
    assert torch.equal(result.detach(), tensor.detach())


@needs_torch
def test_torch_parameter_arrives_as_parameter() -> None:
    parameter = torch.nn.Parameter(torch.rand(LARGE // 4))
    frozen = torch.nn.Parameter(torch.rand(3), requires_grad=False)
    result, frozen_result = round_trip_received((parameter, frozen))
    assert type(result) is torch.nn.Parameter and result.requires_grad
    assert torch.equal(result.detach(), parameter.detach())
    assert type(frozen_result) is torch.nn.Parameter and not frozen_result.requires_grad


@needs_torch
def test_torch_tensor_python_attributes_survive() -> None:
    tensor = torch.rand(4)
    tensor.label = "weights"
    assert round_trip(tensor).label == "weights"


@needs_torch
def test_torch_conjugate_view_round_trips_values() -> None:
    tensor = make_tensor("complex64", 4, 4).conj()
    result = round_trip_received(tensor)
    assert not result.is_conj()
    assert torch.equal(result, tensor.resolve_conj())


@needs_torch
def test_torch_quantized_tensor_falls_back_to_torch_pickling() -> None:
    with warnings.catch_warnings():  # quantized tensors are deprecated, not yet removed
        warnings.simplefilter("ignore", UserWarning)
        tensor = torch.quantize_per_tensor(torch.rand(10), 0.1, 0, dtype=torch.quint8)
        result = round_trip(tensor)
    assert result.is_quantized
    assert torch.equal(result.dequantize(), tensor.dequantize())


@needs_torch
def test_torch_sparse_tensor_falls_back_to_torch_pickling() -> None:
    tensor = torch.eye(5).to_sparse()
    result = round_trip(tensor)
    assert result.is_sparse
    assert torch.equal(result.to_dense(), torch.eye(5))


@needs_torch
def test_torch_reducer_with_numpy_blocked_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the torch reducer used numpy")

    monkeypatch.setitem(sys.modules, "numpy", None)
    monkeypatch.setattr(torch.Tensor, "numpy", forbidden)
    monkeypatch.setattr(torch.Tensor, "__array__", forbidden)
    tensor = make_tensor("bfloat16", LARGE // 2, 2)
    result, small = round_trip_received((tensor, tensor[:2].t()))
    assert_same_tensor(result, tensor)
    assert_same_tensor(small, tensor[:2].t())


@needs_torch
@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs a CUDA device")
def test_torch_cuda_tensor_arrives_on_cpu() -> None:
    tensor = torch.rand(LARGE, device="cuda")
    result = round_trip_received(tensor)
    assert result.device.type == "cpu"
    assert torch.equal(result, tensor.cpu())


@needs_torch
@pytest.mark.slow
def test_torch_fresh_interpreter_with_numpy_blocked_round_trips() -> None:
    output = run_python(
        """
        import sys, warnings
        sys.modules["numpy"] = None
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
        warnings.simplefilter("error")
        from monarch._src.transport.serialization import dumps, loads
        base = torch.arange(100_000, dtype=torch.float32).reshape(1000, 100)
        for tensor in (base, base.t(), base[3:5], torch.tensor(True), base.to(torch.bfloat16)):
            data, buffers = dumps(tensor)
            result = loads(data, [bytearray(buffer) for buffer in buffers])
            assert torch.equal(result, tensor) and result.dtype == tensor.dtype
        print(sys.modules["numpy"] is None)
        """
    )
    assert output.strip() == "True"


# --- by value: lambdas, closures, local classes, __main__ ---------------------------------------


def test_lambda_round_trips_callable() -> None:
    assert round_trip(lambda x: x * 3)(4) == 12


def test_closure_round_trips_with_captured_values() -> None:
    factor = 5

    def scale(x: int) -> int:
        return x * factor

    assert round_trip(scale)(2) == 10


def test_local_class_instance_round_trips() -> None:
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

        def double(self) -> int:
            return self.x * 2

    result = round_trip(Point(21))
    assert result.double() == 42


MAIN_SOURCE = """
import math

OFFSET = 100


class Counter:
    def __init__(self, start):
        self.value = start

    def bump(self):
        self.value += OFFSET
        return math.floor(self.value)


def triple(x):
    return 3 * x
"""


@pytest.mark.slow
def test_main_class_pickled_by_value_loads_where_undefined(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(MAIN_SOURCE)
    # Runs the script as __main__ would: Counter and triple get __module__ == "__main__".
    namespace = runpy.run_path(str(script), run_name="__main__")
    counter_type = namespace["Counter"]
    assert counter_type.__module__ == "__main__"
    data, buffers = dumps((counter_type(1.5), namespace["triple"], lambda y: y - 1))
    message = pickle.dumps((data, [bytes(buffer) for buffer in buffers]))
    output = run_python(
        """
        import json, pickle, sys
        from monarch._src.transport.serialization import loads
        assert not hasattr(sys.modules["__main__"], "Counter")
        data, buffers = pickle.loads(sys.stdin.buffer.read())
        counter, triple, decrement = loads(data, buffers)
        print(json.dumps([counter.bump(), triple(5), decrement(5), type(counter).__name__]))
        """,
        stdin=message,
    )
    assert json.loads(output) == [101, 15, 4, "Counter"]


@pytest.mark.slow
def test_extension_class_claiming_builtins_goes_by_name_with_its_methods() -> None:
    # PyO3 classes say `builtins` unless told otherwise; copied by value they lost every method.
    coordination = pytest.importorskip("torchft.coordination")
    cls = coordination.LighthouseServer
    assert cls.__module__ == "builtins"
    assert round_trip(cls) is cls
    data, buffers = dumps(cls)
    message = pickle.dumps((data, [bytes(buffer) for buffer in buffers]))
    output = run_python(
        """
        import pickle, sys
        from monarch._src.transport.serialization import loads
        data, buffers = pickle.loads(sys.stdin.buffer.read())
        cls = loads(data, buffers)
        print(cls.__name__, hasattr(cls, "address"), hasattr(cls, "shutdown"))
        """,
        stdin=message,
    )
    assert output.split() == ["LighthouseServer", "True", "True"]


# --- failures ---------------------------------------------------------------------------------


def test_dumps_lock_raises_type_error_with_note_naming_lock() -> None:
    with pytest.raises(TypeError) as caught:
        dumps({"args": (1, [threading.Lock()])})
    notes = getattr(caught.value, "__notes__", [])
    assert any("_thread.lock" in note for note in notes), notes


def test_dumps_getstate_error_propagates_unchanged_with_note() -> None:
    with pytest.raises(RuntimeError, match="no state for you") as caught:
        dumps([1, RefusesState()])
    notes = getattr(caught.value, "__notes__", [])
    assert any("RefusesState" in note for note in notes), notes


def test_dumps_after_failure_next_message_round_trips() -> None:
    with pytest.raises(TypeError):
        dumps([np.arange(LARGE), threading.Lock()])
    data, buffers = dumps((1, "x", None))
    assert buffers == [] and loads(data, buffers) == (1, "x", None)


@pytest.mark.slow
def test_import_in_fresh_interpreter_imports_neither_torch_nor_numpy() -> None:
    output = run_python(
        """
        import sys
        import monarch._src.transport.serialization
        print(sorted({"torch", "numpy"} & set(sys.modules)))
        """
    )
    assert output.strip() == "[]"


# --- helpers pickled by the tests (module level, so importable by name) ---------------------------


class ReducesToTuple:
    def __init__(self, value: int) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, ((self.value, "reduced"),))


class NestedDumps:
    """Pickles itself by calling `dumps` from inside `__reduce__`."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        data, buffers = dumps(self.value)
        assert buffers == []
        return (_rebuild_nested, (data,))


def _rebuild_nested(data: bytes) -> NestedDumps:
    return NestedDumps(loads(data, []))


class RefusesState:
    def __getstate__(self) -> Any:
        raise RuntimeError("no state for you")


# ---- the plain-pickle fast path (`serialization._plain`) --------------------------------------
@pytest.mark.parametrize("obj", [
    ((1,), {}),
    ((1, "a", 2.5, None, True, [1, 2], {"k": (1, 2)}), {"x": b"abc"}),
    (("s" * 100_000,), {}),
    -(2**70),
    None,
])
def test_a_small_message_of_builtins_takes_plain_pickle_and_reads_back_the_same(obj):
    assert serialization._plain(obj)
    data, buffers = serialization.dumps(obj)
    assert buffers == []
    assert data == pickle.dumps(obj, 5)
    assert serialization.loads(data) == obj


@pytest.mark.parametrize("obj", [
    ((b"x" * (64 * 1024),), {}),  # a large bytes goes out of band
    ((bytearray(b"x"),), {}),
    (({1: 2},), {}),  # a dict with a non-str key
    ((tuple(range(17)),), {}),
    (([[[[[1]]]]],), {}),  # deeper than four levels
    ((len,), {}),  # a function: by name or by value, the pickler decides
])
def test_anything_else_goes_through_the_pickler(obj):
    assert not serialization._plain(obj)
    data, _ = serialization.dumps(obj)
    assert type(serialization.loads(data, _)) is type(obj)
