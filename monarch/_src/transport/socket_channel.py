"""Batches of frames on a plain TCP socket, driven by the event loop's readiness callbacks.

Used for plain tcp once the opening handshake is done (`tcp.py`'s, or a Dask comm's whose socket
is taken over), and from then on each batch costs one `sendmsg` (a gather write, so large frames are
never copied) and, on the receiving side, one `recv_into` into a staging buffer from which every
complete batch is cut. A batch larger than the staging buffer is read straight into a pooled,
pre-faulted buffer of its own (`bufpool`), which becomes the memory of the arrays and tensors
decoded from it: no byte is copied between the socket and the actor's argument, and the buffer is
reused once those are freed.

Rejected alternatives: tornado's IOStream (what Dask's comm reads and writes through) costs two
futures and an epoll re-registration per message; asyncio's transports copy whatever the kernel
did not take at once, which for a 64 MiB tensor is most of it.

Framing: `<total body length: u64><frame count: u32>`, then the body: one u64 length per frame,
then the frames, each starting at a multiple of `ALIGN` bytes from the body's start. Received
bodies are writable and at least 16-byte aligned (fresh `bytearray`s, or page-aligned pooled
buffers), so frames arrive aligned for any dtype and tensors can be built on them without a copy.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from monarch._src.transport import bufpool

__all__ = ["HEAD", "ProtocolError", "SocketChannel", "check_header", "frame_buffers",
           "gathered_buffers", "one_frame", "split_body"]

logger = logging.getLogger(__name__)

HEAD = struct.Struct("<QI")
ALIGN = 64  # frames start at multiples of this many bytes from the body's start
_PAD = bytes(ALIGN)
_STAGING = bufpool.POOLED_FROM  # batches up to this size are cut from the staging buffer
_READ_BURST = 16 << 20  # bytes of a large batch read per wake-up at most (about 10 ms)
_IOV_MAX = 512  # buffers per sendmsg call (the kernel's limit is 1024)


def _padding(offset: int) -> int:
    return -offset % ALIGN


# One small frame's batch, joined (`one_frame`): header, its length, padding up to ALIGN, frame.
_ONE = struct.Struct("<QIQ")
_ONE_PAD = bytes(ALIGN - 8)
_ONE_MAX = 1 << 12  # frames up to this size are joined into one buffer rather than gathered


def one_frame(frame: bytes) -> bytes:
    """The bytes `gathered_buffers([frame])` sends, as one object: a single short frame (a call
    or a reply) is cheaper to copy once than to gather from four buffers."""
    n = len(frame)
    return _ONE.pack(ALIGN + n, 1, n) + _ONE_PAD + frame


def frame_buffers(frames: list[Any]) -> list[memoryview]:
    """The buffers to send for one batch: header, frame lengths, then the aligned frames (one
    joined buffer for a batch of one short frame, `one_frame`)."""
    if len(frames) == 1 and type(frames[0]) is bytes and len(frames[0]) <= _ONE_MAX:
        return [memoryview(one_frame(frames[0]))]
    return gathered_buffers(frames)


def gathered_buffers(frames: list[Any]) -> list[memoryview]:
    """`frame_buffers` as buffers to gather: the frames themselves are not copied."""
    views = []
    for f in frames:
        view = memoryview(f)
        views.append(view if view.format == "B" and view.ndim == 1 else view.cast("B"))
    n = len(views)
    out: list[memoryview] = [memoryview(b"")]  # the header, filled in below
    offset = 8 * n
    lengths = struct.pack(f"<{n}Q", *(v.nbytes for v in views))
    out.append(memoryview(lengths))
    for view in views:
        pad = _padding(offset)
        if pad:
            out.append(memoryview(_PAD)[:pad])
            offset += pad
        out.append(view)
        offset += view.nbytes
    out[0] = memoryview(HEAD.pack(offset, n))
    return out


class ProtocolError(ValueError):
    """Bytes on a connection that are not a well-formed batch."""


def check_header(total: int, nframes: int, limit: int) -> None:
    """Reject a batch header before anything is allocated for it."""
    if nframes < 1 or 8 * nframes > total:
        raise ProtocolError(f"malformed batch header ({nframes} frames in {total} bytes)")
    if total > limit:
        raise ProtocolError(
            f"a batch of {total} bytes is over codec_max_frame_length ({limit} bytes)"
        )


def split_body(body: Any, nframes: int) -> list[memoryview]:
    """The frames of a received body (views into it); ProtocolError if they do not fit."""
    view = memoryview(body)
    lengths = struct.unpack_from(f"<{nframes}Q", view)
    frames = []
    offset = 8 * nframes
    for length in lengths:
        offset += _padding(offset)
        if offset + length > view.nbytes:
            raise ProtocolError("the frame lengths of a batch exceed its size")
        frames.append(view[offset : offset + length])
        offset += length
    if offset != view.nbytes:
        raise ProtocolError("the frame lengths of a batch do not add up to its size")
    return frames


def _frame_limit() -> int:
    from monarch._src.config import get

    return int(get("codec_max_frame_length"))


class SocketChannel:
    """One connected, non-blocking socket, driven by the event loop's thread.

    Writing may also happen on other threads through `write_direct` (a caller's thread sending
    a small batch without waking the loop); every write holds `wlock`, so batches never
    interleave on the socket. A `channel.Channel`, with every capability: `direct`, and `idle`
    whenever the kernel took everything so far.
    """

    direct = True  # `write_direct` works from any thread

    def __init__(
        self,
        sock: socket.socket,
        on_frames: Callable[[list[memoryview]], None] | None,
        on_closed: Callable[[BaseException], None],
    ) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.loop = asyncio.get_running_loop()
        self._on_frames = on_frames  # None on the sending side: nothing is expected there
        self._on_closed = on_closed
        self._buf = bytearray(_STAGING)  # staging buffer: batches in [_start, _end)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._body: memoryview | None = None  # a large batch being read into a pooled buffer
        self._body_pos = 0
        self._body_frames = 0
        self._unsent: deque[memoryview] = deque()  # what the kernel has not taken yet
        self._drained: asyncio.Future[None] | None = None  # set while `_unsent` is not empty
        # Held by every write (the loop's and `write_direct`'s) and by whoever checks `idle` to
        # decide that it may write now (re-entrant: a writer holding it calls `write_now`).
        self.wlock = threading.RLock()
        self.error: BaseException | None = None  # set once closed
        self.closed: asyncio.Future[BaseException] = self.loop.create_future()
        self.loop.add_reader(self.fd, self._readable)

    # ---- writing ----------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """Nothing is waiting to be sent: a new batch may be written at once."""
        return not self._unsent and self.error is None

    def write_now(self, frames: list[Any]) -> bool:
        """Send one batch now (loop thread); True if the kernel took all of it, else the rest is
        queued and `drained()` completes once it was sent."""
        with self.wlock:
            if self.error is not None:
                raise self.error
            bufs = frame_buffers(frames)
            if not self._unsent:
                bufs = self._send(bufs)
                if not bufs:
                    return True
            self._unsent.extend(bufs)
            self._start_draining()
            return False

    def write_direct(self, frames: list[Any]) -> bool:
        """Send one batch from any thread, the caller holding `wlock` and having found the
        channel `idle`. True once the batch is committed: sent, or its rest queued for the loop
        to send (as `write_now` does); False if nothing could be written (the socket failed:
        the caller sends it the ordinary way, which reports the failure)."""
        try:
            rest = self._send(frame_buffers(frames))
        except OSError:
            return False
        if rest:
            self._unsent.extend(rest)
            self.loop.call_soon_threadsafe(self._drain_from_loop)
        return True

    def _drain_from_loop(self) -> None:
        with self.wlock:
            if self.error is None and self._unsent:
                self._start_draining()

    def _start_draining(self) -> None:
        """Have the loop send `_unsent` as the socket takes it (loop thread, `wlock` held)."""
        if self._drained is None:
            self._drained = self.loop.create_future()
            self.loop.add_writer(self.fd, self._writable)

    async def drained(self) -> None:
        if self._drained is not None:
            await self._drained
        elif self.error is not None:
            raise self.error

    async def write(self, frames: list[Any]) -> None:
        """Send one batch; returns once the kernel took all of it."""
        if not self.write_now(frames):
            await self.drained()

    def _send(self, bufs: list[memoryview]) -> list[memoryview]:
        """Write as much of `bufs` as the kernel takes now; return the rest."""
        i = 0
        while i < len(bufs):
            try:
                n = self.sock.sendmsg(bufs[i : i + _IOV_MAX])
            except (BlockingIOError, InterruptedError):
                break
            while n:
                size = bufs[i].nbytes
                if n >= size:
                    n -= size
                    i += 1
                else:
                    bufs[i] = bufs[i][n:]
                    n = 0
        return bufs[i:]

    def _writable(self) -> None:
        with self.wlock:
            try:
                rest = self._send(list(self._unsent))
            except OSError as exc:
                error: OSError | None = exc
            else:
                error = None
                self._unsent = deque(rest)
        if error is not None:
            self._close(error)
            return
        if not rest:
            self.loop.remove_writer(self.fd)
            drained, self._drained = self._drained, None
            if drained is not None and not drained.done():
                drained.set_result(None)

    # ---- reading ----------------------------------------------------------------------------
    def _readable(self) -> None:
        try:
            if self._body is not None:
                self._read_body(self._body)
                return
            if self._end == len(self._buf):
                self._compact()
            n = self.sock.recv_into(self._view[self._end :])
            if n == 0:
                raise ConnectionResetError("the peer closed the connection")
            self._end += n
            self._parse()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(exc)
        except Exception as exc:  # garbage on the wire, or a batch its receiver rejected
            logger.warning("monarch: closing a connection that sent a bad batch: %s", exc)
            self._close(exc)

    def _read_body(self, body: memoryview) -> None:
        """Read more of a large batch: whatever the kernel has (BlockingIOError once it has
        nothing more), up to `_READ_BURST` bytes per wake-up. Fewer trips through the event loop
        while a big tensor streams in, without holding the loop's other work back for long."""
        stop = min(len(body), self._body_pos + _READ_BURST)
        while self._body_pos < stop:
            n = self.sock.recv_into(body[self._body_pos :])
            if n == 0:
                raise ConnectionResetError("the peer closed the connection")
            self._body_pos += n
        if self._body_pos == len(body):
            self._body = None
            self._deliver(body, self._body_frames)

    def _parse(self) -> None:
        buf = self._buf
        limit = _frame_limit()
        while self._end - self._start >= HEAD.size:
            total, nframes = HEAD.unpack_from(buf, self._start)
            check_header(total, nframes, limit)
            begin = self._start + HEAD.size
            if self._end - begin >= total:
                if nframes == 1 and total <= _ONE_MAX + ALIGN and self._on_frames is not None:
                    # One small frame (most batches a caller waits on): copied straight out of
                    # staging, without a copy of the whole body first.
                    (view,) = split_body(self._view[begin : begin + total], 1)
                    self._start = begin + total
                    self._on_frames([memoryview(bytes(view))])
                    continue
                body = bytearray(self._view[begin : begin + total])
                self._start = begin + total
                self._deliver(body, nframes)
                if self._body is not None:
                    return
                continue
            if HEAD.size + total > len(buf):
                # Too large for staging: read the rest straight into a buffer of its own.
                large = bufpool.acquire(total)
                have = self._end - begin
                large[:have] = self._view[begin : self._end]
                self._body, self._body_pos, self._body_frames = large, have, nframes
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _compact(self) -> None:
        pending = self._end - self._start
        self._buf[:pending] = self._view[self._start : self._end]
        self._start, self._end = 0, pending

    def _deliver(self, body: bytearray | memoryview, nframes: int) -> None:
        if self._on_frames is not None:
            self._on_frames(split_body(body, nframes))

    # ---- closing ----------------------------------------------------------------------------
    def _close(self, exc: BaseException) -> None:
        if self.error is not None:
            return
        self.error = exc
        self.loop.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        with self.wlock:  # not while another thread writes to it (`write_direct`)
            try:
                self.sock.close()
            except OSError:
                pass  # closing a broken socket: the connection is gone either way
        if self._drained is not None and not self._drained.done():
            self._drained.set_exception(exc)
        if not self.closed.done():
            self.closed.set_result(exc)
        self._on_closed(exc)

    def abort(self) -> None:
        self._close(ConnectionAbortedError("the connection was closed locally"))

    async def close(self) -> None:
        """`abort`: closing does not wait for what the kernel has not taken yet."""
        self.abort()
