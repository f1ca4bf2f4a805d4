"""monarch._src.actor.code_sync.auto_reload: the audit-hook import tracking and reloading."""

from __future__ import annotations

import importlib
import os
import pathlib
import sys
import time
from collections.abc import Iterator

import pytest

from monarch._src.actor.code_sync.auto_reload import (
    AutoReloadActor,
    AutoReloader,
    SysAuditHookMultiplexer,
    SysAuditImportHook,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def workspace(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A directory on sys.path; the modules imported from it are forgotten afterwards."""
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", "") or "").startswith(str(tmp_path)):
                del sys.modules[name]
        importlib.invalidate_caches()


def _write(path: pathlib.Path, text: str) -> None:
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    # a filesystem with coarse timestamps: the size differs anyway in these tests
    os.utime(path, ns=(time.time_ns(), max(time.time_ns(), before + 1_000_000)))
    cached = importlib.util.cache_from_source(str(path))
    if os.path.exists(cached):
        os.remove(cached)


def test_hooks_are_removed_by_their_guard() -> None:
    seen: list[str] = []
    mux = SysAuditHookMultiplexer.singleton()
    assert mux is SysAuditHookMultiplexer.singleton()
    with mux.add(lambda event, args: seen.append(event) if event == "test.monarch" else None):
        sys.audit("test.monarch")
    sys.audit("test.monarch")
    assert seen == ["test.monarch"]


def test_a_failing_hook_never_breaks_the_event(capfd: pytest.CaptureFixture[str]) -> None:
    def broken(event: str, args: tuple[object, ...]) -> None:
        if event == "test.monarch.broken":
            raise ValueError("boom")

    with SysAuditHookMultiplexer.singleton().add(broken):
        sys.audit("test.monarch.broken")  # does not raise
    assert "boom" in capfd.readouterr().err


def test_imports_after_install_are_tracked_and_reloaded(workspace: pathlib.Path) -> None:
    imported: list[str] = []
    reloader = AutoReloader()
    assert "os" not in reloader.tracked_modules  # the standard library is not watched
    assert "pytest" in reloader.tracked_modules  # site-packages is

    def callback(name: str, module: object) -> None:
        imported.append(name)
        reloader.import_callback(name, module)  # type: ignore[arg-type]

    (workspace / "pkg_ar").mkdir()
    _write(workspace / "pkg_ar" / "__init__.py", "")
    _write(workspace / "pkg_ar" / "mod.py", "value = 1\n")
    with SysAuditImportHook.install(callback):
        import pkg_ar.mod  # type: ignore[import-not-found]
    assert imported == ["pkg_ar", "pkg_ar.mod"]
    assert reloader.reload_changes() == []
    _write(workspace / "pkg_ar" / "mod.py", "value = 22\n")
    assert reloader.reload_changes() == ["pkg_ar.mod"]
    assert pkg_ar.mod.value == 22
    assert reloader.reload_changes() == []


def test_a_module_that_fails_to_reload_is_tried_again(workspace: pathlib.Path) -> None:
    _write(workspace / "ar_broken.py", "value = 1\n")
    import ar_broken  # type: ignore[import-not-found]

    reloader = AutoReloader()
    _write(workspace / "ar_broken.py", "value = (\n")
    with pytest.raises(SyntaxError):
        reloader.reload_changes()
    assert ar_broken.value == 1
    _write(workspace / "ar_broken.py", "value = 333\n")
    assert reloader.reload_changes() == ["ar_broken"] and ar_broken.value == 333
    del sys.modules["ar_broken"]
    assert reloader.reload_changes() == [] and "ar_broken" not in reloader.tracked_modules


class Loader(AutoReloadActor):
    """The reload actor, plus a way to import a module of a directory and read it."""

    from monarch.actor import endpoint

    @endpoint
    async def load(self, directory: str, name: str) -> int:
        sys.path.insert(0, directory)
        return int(importlib.import_module(name).value)

    @endpoint
    async def value(self, name: str) -> int:
        return int(sys.modules[name].value)


def test_reload_actor_updates_a_running_proc(tmp_path: pathlib.Path) -> None:
    from monarch.actor import this_host

    _write(tmp_path / "ar_remote.py", "value = 1\n")
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        loader = procs.spawn("loader", Loader)
        assert sorted(v for _, v in loader.load.call(str(tmp_path), "ar_remote")
                      .get(timeout=30).items()) == [1, 1]
        _write(tmp_path / "ar_remote.py", "value = 4444\n")
        reloaded = loader.reload.call().get(timeout=30)
        assert [v for _, v in reloaded.items()] == [["ar_remote"], ["ar_remote"]]
        assert [v for _, v in loader.value.call("ar_remote").get(timeout=30).items()] == [
            4444, 4444]
    finally:
        procs.stop().get(timeout=30)
