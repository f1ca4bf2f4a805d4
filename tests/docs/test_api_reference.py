"""The API reference builds without warnings, and every public name has a docstring to show."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Every public module; docs/api.rst documents each of them.
PUBLIC_MODULES = [
    "monarch",
    "monarch.actor",
    "monarch.config",
    "monarch.notebook",
    "monarch.rdma",
    "monarch.job",
    "monarch.job.kubernetes",
    "monarch.spmd",
    "monarch.simulator",
    "monarch.experimental.thread_timeout",
    "monarch.tools.config",
]


def _public_members(cls: type) -> list[tuple[str, Any]]:
    """Methods and properties a class defines itself (not inherited), without a leading `_`."""
    return [
        (name, value)
        for name, value in vars(cls).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or isinstance(value, (property, classmethod, staticmethod)))
    ]


def undocumented(module: ModuleType) -> list[str]:
    """Public names of `module` (from `__all__`) and of its classes that have no docstring.

    Plain data (constants, enum-like values) cannot carry a docstring; those must be named in
    the module's own docstring instead.
    """
    missing = []
    module_doc = module.__doc__ or ""
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.ismodule(obj) or inspect.isclass(obj) or callable(obj):
            if not (obj.__doc__ or "").strip():
                missing.append(f"{module.__name__}.{name}")
        elif name not in module_doc:
            missing.append(f"{module.__name__}.{name} (data: name it in the module docstring)")
        if inspect.isclass(obj) and obj.__module__.startswith("monarch"):
            for member, value in _public_members(obj):
                target = value.fget if isinstance(value, property) else value
                target = getattr(target, "__func__", target)
                if not (getattr(target, "__doc__", None) or "").strip():
                    missing.append(f"{module.__name__}.{name}.{member}")
    return missing


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(name: str) -> None:
    module = importlib.import_module(name)
    assert (module.__doc__ or "").strip(), f"{name} has no module docstring"
    assert undocumented(module) == []


def test_api_reference_lists_every_public_module() -> None:
    api = (ROOT / "docs" / "api.rst").read_text()
    assert [m for m in PUBLIC_MODULES if f".. automodule:: {m}\n" not in api] == []


@pytest.mark.timeout(180)
def test_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    env = dict(os.environ, MONARCH_PRESTART="0")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html",
         str(ROOT / "docs"), str(tmp_path / "html")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=170,
    )
    assert proc.returncode == 0, f"sphinx failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    api = (tmp_path / "html" / "api.html").read_text()
    for module in PUBLIC_MODULES:
        assert f'id="{module}.' in api, f"{module} documented no members"
