"""Who and where a process is: host identity for same-host detection, and process start times.

Two procs may use process_vm_readv on each other only when they share a kernel *and* a pid
namespace (a container on the same host has its own pids), so the host identity is the kernel's
boot id plus the pid namespace inode, plus the hostname for readability. A pid can be reused after
its process exits, so a handle also records the owner's start time (field 22 of /proc/<pid>/stat,
in clock ticks since boot, read by `monarch._src.procstat`); a pid whose start time differs is a
different process.
"""

from __future__ import annotations

import functools
import os
import socket

from monarch._src.procstat import process_start_time

__all__ = ["host_identity", "process_start_time"]


@functools.cache
def host_identity() -> str:
    """A string equal for two processes exactly when they can address each other's pids."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "no-boot-id"
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = "no-pidns"
    return f"{socket.gethostname()}/{boot}/{pidns}"
