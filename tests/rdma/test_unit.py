"""Unit tests of the RDMA pieces that need no process and no socket.

Covers argument checking (`memory`), host identity, the process_vm_* wrapper against this very
process, the ibverbs probe against fake sysfs trees, backend selection and the warning classes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import pickle
import re

import pytest
import torch

from monarch._src.rdma import hostinfo, ibverbs, vm
from monarch._src.rdma.errors import RDMABufferDroppedError
from monarch._src.rdma.handle import BufferHandle
from monarch._src.rdma.memory import as_region
from monarch.config import configured
from monarch.rdma import (
    RDMAAction,
    get_rdma_backend,
    is_ibverbs_available,
    is_rdma_available,
)

# ---- memory ------------------------------------------------------------------------------------

# Monarch's text for local memory that is not one contiguous dimension.
_NOT_1D = "only supports 1d contiguous torch.Tensor or 1d c-contiguous memoryview"


def test_region_memoryview_bytearray_gives_its_address() -> None:
    ba = bytearray(b"abcdef")
    region = as_region(memoryview(ba), "x")
    assert region.nbytes == 6 and region.writable and region.device == "cpu"
    assert ctypes.string_at(region.addr, 6) == b"abcdef"


def test_region_memoryview_wider_format_counts_bytes() -> None:
    mv = memoryview(bytearray(16)).cast("i")
    assert as_region(mv, "x").nbytes == 16


def test_region_empty_memoryview_rejected_with_value_error() -> None:
    with pytest.raises(ValueError, match="size 0"):
        as_region(memoryview(bytearray()), "RDMABuffer data")


def test_region_strided_memoryview_rejected_with_value_error() -> None:
    with pytest.raises(ValueError, match=_NOT_1D):
        as_region(memoryview(bytearray(10))[::2], "RDMABuffer data")


def test_region_2d_memoryview_rejected_with_value_error() -> None:
    with pytest.raises(ValueError, match=_NOT_1D):
        as_region(memoryview(bytearray(8)).cast("B", (2, 4)), "RDMABuffer data")


def test_region_readonly_destination_rejected() -> None:
    with pytest.raises(ValueError, match="read-only"):
        as_region(memoryview(b"abc"), "dst", need_writable=True)
    assert not as_region(memoryview(b"abc"), "src").writable


def test_region_tensor_slice_points_into_base() -> None:
    t = torch.arange(10, dtype=torch.int32)
    region = as_region(t[2:5], "x")
    assert region.addr == t.data_ptr() + 8 and region.nbytes == 12


def test_region_noncontiguous_tensor_rejected_with_value_error() -> None:
    with pytest.raises(ValueError, match="contiguous"):
        as_region(torch.arange(10)[::2], "RDMABuffer data")


def test_region_2d_tensor_rejected_with_value_error() -> None:
    # Monarch's text, with the tensor itself after "Got: ".
    with pytest.raises(ValueError, match=_NOT_1D + ". Got: tensor"):
        as_region(torch.zeros(2, 3), "RDMABuffer data")


def test_region_empty_tensor_rejected_with_value_error() -> None:
    with pytest.raises(ValueError, match="size 0"):
        as_region(torch.zeros(0), "RDMABuffer data")


def test_region_other_types_rejected_with_monarchs_value_error() -> None:
    with pytest.raises(ValueError, match=_NOT_1D + re.escape(". Got: b'abc'")):
        as_region(b"abc", "RDMABuffer data")
    with pytest.raises(ValueError, match=_NOT_1D + re.escape(". Got: [1, 2]")):
        as_region([1, 2], "RDMABuffer data")


# ---- host identity and process_vm_* -------------------------------------------------------------


def test_host_identity_stable_and_names_pid_namespace() -> None:
    assert hostinfo.host_identity() == hostinfo.host_identity()
    assert "pid:" in hostinfo.host_identity()


def test_process_start_time_of_self_known_and_of_missing_pid_none() -> None:
    assert isinstance(hostinfo.process_start_time(os.getpid()), int)
    assert hostinfo.process_start_time(2**22 + 12345) is None


def test_vm_readv_writev_on_self_copy_bytes() -> None:
    src = ctypes.create_string_buffer(b"0123456789", 10)
    dst = ctypes.create_string_buffer(10)
    pid = os.getpid()
    vm.readv(pid, [(ctypes.addressof(dst), 4), (ctypes.addressof(dst) + 4, 6)],
             [(ctypes.addressof(src), 10)])
    assert dst.raw == b"0123456789"
    vm.writev(pid, [(ctypes.addressof(src) + 8, 2)], [(ctypes.addressof(dst), 2)])
    assert dst.raw == b"8923456789"


def test_vm_missing_pid_raises_no_process() -> None:
    buf = ctypes.create_string_buffer(8)
    with pytest.raises(vm.VmNoProcess) as info:
        vm.readv(2**22 + 12345, [(ctypes.addressof(buf), 8)], [(ctypes.addressof(buf), 8)])
    assert info.value.errno == errno.ESRCH


def test_vm_unmapped_address_raises_fault() -> None:
    buf = ctypes.create_string_buffer(8)
    with pytest.raises(vm.VmFault):
        vm.readv(os.getpid(), [(ctypes.addressof(buf), 8)], [(8, 8)])


def test_vm_unequal_spans_rejected() -> None:
    with pytest.raises(ValueError, match="equal"):
        vm.readv(os.getpid(), [(0, 8)], [(0, 4)])


# ---- ibverbs probe and backend selection --------------------------------------------------------


def test_ibverbs_probe_missing_sysfs_says_why(tmp_path: pytest.TempPathFactory) -> None:
    probe = ibverbs._probe_system(str(tmp_path) + "/absent", None)
    assert not probe.available and "missing or empty" in probe.reason


def test_ibverbs_probe_device_without_pyverbs_says_why(tmp_path: os.PathLike[str]) -> None:
    os.mkdir(os.path.join(tmp_path, "mlx5_0"))
    probe = ibverbs._probe_system(str(tmp_path), None)
    if not ibverbs.import_pyverbs():
        assert not probe.available and "python3-pyverbs" in probe.reason
    elif not os.path.isdir(ibverbs.SYSFS_DIR):
        # pyverbs present but the kernel has no verbs devices: it says it cannot list any.
        assert not probe.available and "pyverbs" in probe.reason


def test_ibverbs_probe_disabled_by_config() -> None:
    with configured(rdma_disable_ibverbs=True):
        probe = ibverbs.probe()
        assert not probe.available and "rdma_disable_ibverbs" in probe.reason
        assert not is_ibverbs_available()
        assert get_rdma_backend() == "tcp"


def test_backend_none_when_tcp_fallback_disallowed_and_no_verbs() -> None:
    with configured(rdma_disable_ibverbs=True, rdma_allow_tcp_fallback=False):
        assert get_rdma_backend() == "none"


def test_is_rdma_available_deprecated_alias() -> None:
    with pytest.warns(DeprecationWarning, match="is_ibverbs_available"):
        assert is_rdma_available() == is_ibverbs_available()


def test_backend_on_this_machine_matches_probe() -> None:
    probe = ibverbs.probe()
    assert get_rdma_backend() == ("ibverbs" if probe.available else "tcp")


# ---- handle, errors, RDMAAction -----------------------------------------------------------------


def _handle() -> BufferHandle:
    return BufferHandle(1, 3, "<root>", "tcp://127.0.0.1:1", 1, 2, "h", 4096, 10, 8192,
                        ("127.0.0.1", 2), True, "cpu")


def test_handle_pickles_small_and_describes_itself() -> None:
    h = _handle()
    assert pickle.loads(pickle.dumps(h)) == h
    assert len(pickle.dumps(h)) < 512
    assert "RDMABuffer 1 (10 bytes) owned by <root>" == h.describe()


def test_dropped_error_pickles_and_is_runtime_error() -> None:
    err = pickle.loads(pickle.dumps(RDMABufferDroppedError("gone.")))
    assert isinstance(err, RuntimeError) and str(err) == "gone."


def test_rdma_action_atomics_not_implemented() -> None:
    action = RDMAAction()
    with pytest.raises(NotImplementedError):
        action.fetch_add()
    with pytest.raises(NotImplementedError):
        action.compare_and_swap()


def test_rdma_action_rejects_non_buffer() -> None:
    with pytest.raises(TypeError, match="RDMABuffer"):
        RDMAAction().read_remote(memoryview(bytearray(4)), "nope")  # type: ignore[arg-type]


def test_forcing_ibverbs_without_device_is_refused_with_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from monarch._src.rdma.transfer import choose_plane

    if is_ibverbs_available():
        pytest.skip("a verbs device exists here; the refusal cannot happen")
    monkeypatch.setenv("MONARCH_RDMA_FORCE_PLANE", "ibverbs")
    with pytest.raises(RuntimeError, match="no verbs registration"):
        choose_plane(_handle())
