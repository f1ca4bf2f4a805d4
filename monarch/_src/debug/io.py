"""Where the `monarch_dbg>` shell and an attached pdb read and write: the terminals of the debugger.

Every terminal is a `DebugIO` whose methods run on the debug controller's loop:

* `DebugStdIO`: the controller process's own stdin/stdout;
* `DebugCliIO`: a connection to the controller's terminal server (`monarch debug`, or any plain
  TCP client such as `nc`);
* `ScriptIO`: the in-process `debug_controller().attach(...)`: commands from a list or an
  `input()`-like function, pdb's output to a text stream (`controller.py`);
* `BridgeIO`: a thread outside the loop reading output chunks and sending lines (the admin
  server's JSON attach, `controller.SessionHandle`).

A terminal that fails (the client went away) raises `DebugIOError`; the session it was attached
to keeps its pending read for the next attachment.
"""

from __future__ import annotations

import asyncio
import queue
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

__all__ = ["BridgeIO", "DebugCliIO", "DebugIO", "DebugIOError", "DebugStdIO", "ScriptIO"]


class DebugIO:
    """A terminal of the debugger (abstract)."""

    async def input(self, prompt: str = "") -> str:
        """One line typed by the user (without its newline)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement input()")

    async def output(self, msg: str) -> None:
        """Show `msg` (written as is: it carries its own newlines)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement output()")

    async def quit(self) -> None:
        """The user left the shell."""


class DebugIOError(RuntimeError):
    """A terminal of the debugger failed (its client disconnected, its input ended)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("Error encountered during debugger I/O operation."
                         + (f" ({detail})" if detail else ""))


class DebugStdIO(DebugIO):
    """The controller process's stdin and stdout."""

    async def input(self, prompt: str = "") -> str:
        return await asyncio.to_thread(input, prompt)

    async def output(self, msg: str) -> None:
        sys.stdout.write(msg)
        sys.stdout.flush()


class DebugCliIO(DebugIO):
    """One client of the controller's terminal server: lines in, text out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def input(self, prompt: str = "") -> str:
        await self.output(prompt)
        try:
            line = (await self._reader.readline()).decode()
        except (OSError, UnicodeDecodeError) as exc:
            raise DebugIOError(str(exc)) from exc
        if not line.endswith("\n"):
            raise DebugIOError("the client closed its input")
        return line.rstrip("\r\n")

    async def output(self, msg: str) -> None:
        if not msg:
            return
        try:
            self._writer.write(msg.encode())
            await self._writer.drain()
        except (OSError, RuntimeError) as exc:
            raise DebugIOError(str(exc)) from exc

    async def quit(self) -> None:
        await self.output("Quitting debug session...\n")
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass  # the client closed first


class ScriptIO(DebugIO):
    """An in-process attachment: pdb's output goes to `out` (and the transcript), the text after
    its last newline held back as the prompt of the next `input`; lines come from `commands`
    (then `continue` once they run out) or from `ask(prompt)` in a worker thread."""

    def __init__(self, out: TextIO, commands: Iterator[str] | None,
                 ask: Callable[[str], str]) -> None:
        self._out = out
        self._commands = commands
        self._ask = ask
        self._tail = ""  # output after the last newline: the prompt, if input follows
        self.transcript: list[str] = []

    def write(self, text: str) -> None:
        """Write to the stream and the transcript at once."""
        self._out.write(text)
        self.transcript.append(text)

    async def output(self, msg: str) -> None:
        text = self._tail + msg
        cut = text.rfind("\n") + 1
        self._tail = text[cut:]
        if cut:
            self.write(text[:cut])

    def flush(self) -> None:
        """Write what is held back (the session ended without asking for input)."""
        if self._tail:
            self.write(self._tail)
            self._tail = ""
        self._out.flush()

    async def input(self, prompt: str = "") -> str:
        prompt, self._tail = self._tail + prompt, ""
        if self._commands is not None:
            line = next(self._commands, "continue")
            self.write(f"{prompt}{line}\n")
            return line
        self._out.flush()
        try:
            line = await asyncio.to_thread(self._ask, prompt)
        except EOFError:
            line = "continue"
        self.transcript.append(f"{prompt}{line}\n")
        return line


class BridgeIO(DebugIO):
    """A terminal driven by a thread off the loop: output arrives on `chunks` as (text,
    waiting-for-input) pairs, a complete line at a time, and the text after the last newline
    goes with the request for input; `send(line)` answers it. `close()` makes a pending or later
    `input` fail, so the attachment ends and the session keeps its read."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.chunks: queue.SimpleQueue[tuple[str, bool] | None] = queue.SimpleQueue()
        self._tail = ""
        self._answer: asyncio.Future[str | None] | None = None
        self._closed = False

    async def output(self, msg: str) -> None:
        text = self._tail + msg
        cut = text.rfind("\n") + 1
        self._tail = text[cut:]
        if cut:
            self.chunks.put((text[:cut], False))

    async def input(self, prompt: str = "") -> str:
        if self._closed:
            raise DebugIOError("detached")
        text, self._tail = self._tail + prompt, ""
        self._answer = self._loop.create_future()
        self.chunks.put((text, True))
        line = await self._answer
        self._answer = None
        if line is None:
            raise DebugIOError("detached")
        return line

    def finish(self) -> None:
        """The attachment ended (loop side): flush what is held back and mark the end."""
        if self._tail:
            self.chunks.put((self._tail, False))
            self._tail = ""
        self.chunks.put(None)

    def _resolve(self, line: str | None) -> None:
        if line is None:
            self._closed = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(line)

    def send(self, line: str) -> None:
        """Answer the pending request for input (any thread)."""
        self._loop.call_soon_threadsafe(self._resolve, line)

    def close(self) -> None:
        """Detach (any thread): the session stays paused for the next attachment."""
        try:
            self._loop.call_soon_threadsafe(self._resolve, None)
        except RuntimeError:
            pass  # the controller's loop is gone
