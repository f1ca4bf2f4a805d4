"""Same-host one-sided copies: process_vm_readv / process_vm_writev through ctypes on libc.

The owner publishes (pid, start time, address, length) in the handle and never runs anything per
transfer: the reader's kernel copies straight between the two address spaces, once. The kernel
allows it when the caller may ptrace the owner (same uid, and Yama's ptrace_scope permits it).
Under Yama scope 1 only ancestors may, and sibling procs are not ancestors, so an owner calls
`allow_any_tracer()` (PR_SET_PTRACER_ANY) when it first registers a buffer: that admits any
process of the same user, which can already reach the proc's loopback mailbox and make it
unpickle anything, so it grants nothing new. Where it is still refused (scope 2 or 3, a seccomp
policy), `VmRefused` sends the transfer to the shared-memory fallback (`shm.py`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Sequence

__all__ = [
    "VmFault", "VmNoProcess", "VmRefused", "allow_any_tracer", "ptrace_scope", "readv", "writev",
]

_PR_SET_PTRACER = 0x59616D61
_PR_SET_PTRACER_ANY = ctypes.c_ulong(-1 & 0xFFFFFFFFFFFFFFFF)


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_readv = _libc.process_vm_readv
_writev = _libc.process_vm_writev
for _fn in (_readv, _writev):
    _fn.restype = ctypes.c_ssize_t
    _fn.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                    ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.c_ulong]


class VmRefused(OSError):
    """The kernel refused the cross-process copy (EPERM/ENOSYS): use the shm fallback."""


class VmNoProcess(OSError):
    """The target pid does not exist (ESRCH): the owner process is gone."""


class VmFault(OSError):
    """A remote address was not mapped (EFAULT): the memory was released or the pid reused."""


def ptrace_scope() -> int | None:
    """Yama's ptrace_scope (0-3), or None where Yama is not built into the kernel."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def allow_any_tracer() -> None:
    """Let any same-uid process use process_vm_* on this one under Yama scope 1."""
    if ptrace_scope() is None:
        return
    _libc.prctl(_PR_SET_PTRACER, _PR_SET_PTRACER_ANY, 0, 0, 0)


def _iovecs(spans: Sequence[tuple[int, int]]) -> ctypes.Array[_IoVec]:
    arr = (_IoVec * len(spans))()
    for i, (addr, n) in enumerate(spans):
        arr[i].iov_base = addr
        arr[i].iov_len = n
    return arr


def _raise(err: int, pid: int) -> None:
    msg = os.strerror(err)
    if err in (errno.EPERM, errno.ENOSYS, errno.EACCES):
        raise VmRefused(err, f"process_vm_* on pid {pid} refused: {msg}")
    if err == errno.ESRCH:
        raise VmNoProcess(err, f"no process {pid}: {msg}")
    if err == errno.EFAULT:
        raise VmFault(err, f"bad address in process {pid}: {msg}")
    raise OSError(err, f"process_vm_* on pid {pid} failed: {msg}")


def _move(fn: object, pid: int, local: Sequence[tuple[int, int]],
          remote: Sequence[tuple[int, int]]) -> None:
    """Copy until every byte of the spans moved; the kernel may stop early at a page fault."""
    total = sum(n for _, n in local)
    if total != sum(n for _, n in remote):
        raise ValueError("process_vm_* spans must have equal total lengths.")
    done = 0
    while done < total:
        lv, rv = _iovecs(_advance(local, done)), _iovecs(_advance(remote, done))
        n = fn(pid, lv, len(lv), rv, len(rv), 0)  # type: ignore[operator]
        if n < 0:
            _raise(ctypes.get_errno(), pid)
        if n == 0:
            raise VmFault(errno.EFAULT, f"process_vm_* on pid {pid} made no progress")
        done += n


def _advance(spans: Sequence[tuple[int, int]], skip: int) -> list[tuple[int, int]]:
    if skip == 0:
        return list(spans)
    out: list[tuple[int, int]] = []
    for addr, n in spans:
        if skip >= n:
            skip -= n
            continue
        out.append((addr + skip, n - skip))
        skip = 0
    return out


def readv(pid: int, local: Sequence[tuple[int, int]], remote: Sequence[tuple[int, int]]) -> None:
    """Copy the `remote` spans of process `pid` into the `local` spans of this process."""
    _move(_readv, pid, local, remote)


def writev(pid: int, local: Sequence[tuple[int, int]], remote: Sequence[tuple[int, int]]) -> None:
    """Copy the `local` spans of this process into the `remote` spans of process `pid`."""
    _move(_writev, pid, local, remote)
