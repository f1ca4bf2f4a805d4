"""Reload the modules of a process whose files changed since they were imported.

`AutoReloader` remembers the file of every module imported so far (and, through an import
hook, of every module imported later), with its size, mtime and inode; `reload_changes()`
re-executes the modules whose file differs now (`importlib.reload`) and returns their names.
The standard library is not tracked; site-packages is.

The import hook is an audit hook (`sys.addaudithook`): an `import` event names the module and
the `exec` event of its code that follows says it was executed from a file, so modules found by
any finder are seen. Audit hooks cannot be removed, so one process-wide hook
(`SysAuditHookMultiplexer`) dispatches to the hooks added to it, each removed again by closing
the guard `add()` returns. A failing hook is reported on stderr and never breaks the
operation that raised the event.

`AutoReloadActor` is an actor with a `reload` endpoint: spawn it on a proc mesh, sync new code
to the hosts, and call `reload` to bring the procs' modules up to date without restarting them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import os
import sys
import sysconfig
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from monarch.actor import Actor, endpoint

__all__ = [
    "AutoReloadActor",
    "AutoReloader",
    "Fingerprint",
    "SysAuditHookGuard",
    "SysAuditHookMultiplexer",
    "SysAuditImportHook",
]

AuditHook = Callable[[str, tuple[Any, ...]], None]


class SysAuditHookGuard(contextlib.AbstractContextManager["SysAuditHookGuard"]):
    """Keeps one hook of the multiplexer; `close()` (or leaving the `with` block, or the guard
    being collected) removes it."""

    def __init__(self, hooks: dict[int, AuditHook], idx: int) -> None:
        self._hooks = hooks
        self._idx = idx

    def close(self) -> None:
        """Remove the hook (idempotent)."""
        self._hooks.pop(self._idx, None)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class SysAuditHookMultiplexer:
    """The process's one audit hook, calling every hook added to it."""

    _instance: SysAuditHookMultiplexer | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self._ids = itertools.count()
        self._hooks: dict[int, AuditHook] = {}
        self._busy = threading.local()  # set while this thread runs the hooks

    @classmethod
    def singleton(cls) -> SysAuditHookMultiplexer:
        """The multiplexer, installed with `sys.addaudithook` on first use."""
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
                sys.addaudithook(cls._instance._dispatch)
            return cls._instance

    def add(self, hook: AuditHook) -> SysAuditHookGuard:
        """Call `hook(event, args)` for every audit event until the guard is closed."""
        idx = next(self._ids)
        self._hooks[idx] = hook
        return SysAuditHookGuard(self._hooks, idx)

    def _dispatch(self, event: str, args: tuple[Any, ...]) -> None:
        if not self._hooks or getattr(self._busy, "on", False):
            return  # nothing to call, or an event raised by a hook itself
        self._busy.on = True
        try:
            for hook in list(self._hooks.values()):
                try:
                    hook(event, args)
                except Exception:  # noqa: BLE001 - an audit hook's error would fail the event
                    stream = sys.__stderr__
                    if stream is not None:
                        stream.write(f"monarch: audit hook {hook!r} failed on {event!r}:\n"
                                     f"{traceback.format_exc()}")
        finally:
            self._busy.on = False


class SysAuditImportHook:
    """An audit hook calling `callback(name, module)` when a module's code is executed from its
    file (an import, or a reload).

    The `exec` event of a module body names only the file, so the module is looked up among
    the names of the `import` events not matched yet (a package's import event comes after its
    submodule's), then, for imports that raise no event (`importlib.import_module`), in
    `sys.modules`.
    """

    _PENDING_LIMIT = 64  # import events of modules that were never executed (already loaded)

    def __init__(self, callback: Callable[[str, ModuleType], None]) -> None:
        self._callback = callback
        self._local = threading.local()  # .pending: names of import events, per thread

    @classmethod
    def install(cls, callback: Callable[[str, ModuleType], None]) -> SysAuditHookGuard:
        """Start calling `callback` for imported modules; close the guard to stop."""
        return SysAuditHookMultiplexer.singleton().add(cls(callback))

    def _pending(self) -> list[str]:
        pending: list[str] | None = getattr(self._local, "pending", None)
        if pending is None:
            pending = self._local.pending = []
        return pending

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "import":
            pending = self._pending()
            pending.append(str(args[0]))
            del pending[:-self._PENDING_LIMIT]
            return
        if event != "exec" or not args:
            return
        code = args[0]
        filename = getattr(code, "co_filename", None)
        if getattr(code, "co_name", None) != "<module>" or not isinstance(filename, str) \
                or not os.path.isabs(filename):
            return  # not a module body run from a file (an eval, a string exec)
        target = Path(filename)
        pending = self._pending()
        for i in range(len(pending) - 1, -1, -1):
            module = sys.modules.get(pending[i])
            if module is not None and _runs_from(module, target):
                name = pending.pop(i)
                self._callback(name, module)
                return
        for name, module in list(sys.modules.items()):
            if module is not None and _runs_from(module, target):
                self._callback(name, module)
                return


def _runs_from(module: ModuleType, target: Path) -> bool:
    filename = getattr(module, "__file__", None)
    # a code object names its source file even when it was loaded from a .pyc
    return isinstance(filename, str) and _source_path(filename) == target


def _source_path(filename: str) -> Path:
    path = Path(filename)
    return path.with_suffix(".py") if path.suffix in (".pyc", ".pyo") else path


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """What tells a module's file changed: its modification time, size and inode."""

    mtime: float
    size: int
    inode: int = 0

    @classmethod
    def for_path(cls, path: Path) -> Fingerprint:
        """The fingerprint of the file at `path` now (OSError if it is gone)."""
        st = path.stat()
        return cls(mtime=st.st_mtime_ns / 1e9, size=st.st_size, inode=st.st_ino)


def _untracked_roots() -> list[Path]:
    """The standard library's directories, minus site-packages below them."""
    paths = sysconfig.get_paths()
    return [Path(paths[name]).resolve() for name in ("stdlib", "platstdlib") if name in paths]


def _site_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    return [Path(paths[name]).resolve() for name in ("purelib", "platlib") if name in paths]


class AutoReloader:
    """Tracks the files of this process's modules; `reload_changes()` reloads the changed ones.

    `reload` re-executes one module (default `importlib.reload`).
    """

    def __init__(self, reload: Callable[[ModuleType], ModuleType] = importlib.reload) -> None:
        self._reload = reload
        self._stdlib = _untracked_roots()
        self._site = _site_roots()
        self._tracked: dict[str, tuple[Path, Fingerprint]] = {}
        for name, module in list(sys.modules.items()):
            if module is not None:
                self._maybe_track(name, module)

    def _maybe_track(self, name: str, module: ModuleType) -> None:
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str) or not os.path.isabs(filename):
            return  # built in, frozen, or an unusual loader's relative name
        path = Path(filename)
        if any(path.is_relative_to(root) for root in self._stdlib) and not any(
                path.is_relative_to(root) for root in self._site):
            return
        try:
            self._tracked[name] = (path, Fingerprint.for_path(path))
        except OSError:
            return  # no file behind it (a zip import, a deleted file)

    def import_callback(self, name: str, module: ModuleType) -> None:
        """Track a module that was just imported (the `SysAuditImportHook` callback)."""
        self._maybe_track(name, module)

    @property
    def tracked_modules(self) -> list[str]:
        """The names of the modules whose files are watched."""
        return list(self._tracked)

    def reload_changes(self) -> list[str]:
        """Reload every tracked module whose file changed; returns their names, in the order
        they were reloaded. A module that fails to reload raises (its file stays marked
        changed, so the next call tries again); the ones before it stay reloaded."""
        reloaded: list[str] = []
        for name, (path, before) in list(self._tracked.items()):
            module = sys.modules.get(name)
            if module is None:
                del self._tracked[name]
                continue
            try:
                now = Fingerprint.for_path(path)
            except OSError:
                continue  # the file is gone for now; a later sync may bring it back
            if now == before:
                continue
            self._reload(module)
            self._tracked[name] = (path, now)
            reloaded.append(name)
        return reloaded


class AutoReloadActor(Actor):
    """Reloads the changed modules of the proc it runs on: `reload.call()` after new code
    was synced to the hosts."""

    def __init__(self) -> None:
        self._reloader = AutoReloader()
        self._guard = SysAuditImportHook.install(self._reloader.import_callback)

    @endpoint
    async def reload(self) -> list[str]:
        """Reload the modules whose files changed; returns their names."""
        return self._reloader.reload_changes()
