"""`BufferHandle`: what an `RDMABuffer` pickles to - everything a peer needs to reach the bytes.

A handle is about 200 bytes: it names the owner (actor id, proc address, pid and start time, host
identity), the memory (address, length, writable, device), the registration (buffer id and a
random 64-bit token, which doubles as the capability the TCP data plane checks), the address of
the buffer's *valid word* in the owner (holds the token while registered, 0 after `drop()`), and
the owner's data-plane endpoints (TCP listener; verbs queue-pair info when a device exists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BufferHandle"]


@dataclass(frozen=True)
class BufferHandle:
    """The control-plane description of one registered buffer."""

    buffer_id: int  # key in the owner's manager
    token: int  # random, nonzero; equals the valid word while registered
    owner: str  # the creating actor's id string
    owner_addr: str  # the owner proc's mailbox address (for control operations)
    pid: int  # the owner's pid
    start_time: int  # the owner's start time in clock ticks since boot (guards pid reuse)
    host: str  # hostinfo.host_identity() of the owner
    addr: int  # address of the bytes in the owner (the pinned mirror for CUDA buffers)
    nbytes: int  # length in bytes
    slot_addr: int  # address of the valid word in the owner
    tcp: tuple[str, int] | None  # the owner's TCP data-plane listener
    writable: bool  # False when registered over read-only memory
    device: str  # "cpu" or "cuda:<n>" (then the owner stages through `addr`)
    ib: Any = None  # ibverbs.RemoteKey when the owner registered with a verbs device

    def describe(self) -> str:
        """A short name for error messages."""
        return f"RDMABuffer {self.buffer_id} ({self.nbytes} bytes) owned by {self.owner}"
