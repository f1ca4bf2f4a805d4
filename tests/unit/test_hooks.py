"""The hook mechanism (`runtime/hook.py`: `Slot`, `Hook`), the slots and what the wiring fills
(checked in a fresh interpreter, so nothing another test imported has filled a slot already),
and that no module patches another monarch module's globals instead of installing into a slot."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from monarch._src.mesh.hooks import Hook, Slot

pytestmark = pytest.mark.timeout(60)

_PROBE = """
import json, sys
from monarch._src.mesh import hooks
before = sorted(n for n, s in hooks.SLOTS.items() if s.get() is not None)
import monarch.actor
after_actor = sorted(n for n, s in hooks.SLOTS.items() if s.get() is not None)
import monarch.tools.config
after_tools = sorted(n for n, s in hooks.SLOTS.items() if s.get() is not None)
print(json.dumps([before, after_actor, after_tools, "torch" in sys.modules,
                  hooks.proc_setup.get()]))
"""


def test_importing_the_facades_fills_the_slots_without_importing_torch():
    run = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=50)
    assert run.returncode == 0, run.stderr
    before, after_actor, after_tools, torch_loaded, setup = json.loads(run.stdout)
    assert before == []  # the lower layers fill nothing themselves
    assert after_actor == ["fault_hook", "local_host", "mesh_engine", "proc_setup", "rref"]
    assert after_tools == sorted([*after_actor, "workspace_sync"])
    assert not torch_loaded  # the tensor engine's slots import it on first use only
    assert setup == ["monarch._src.wiring.proc:install"]


def test_an_empty_slot_says_what_is_missing():
    slot: Slot[int] = Slot("example", "An example.", "Example needs the feature")
    assert slot.get() is None
    with pytest.raises(RuntimeError, match=r"Example needs the feature \(hook slot 'example'"):
        slot.require()
    slot.install(3)
    assert slot.require() == 3
    assert "example (An example.): filled with 3" in repr(slot)


def test_a_slot_keeps_the_last_install_until_cleared():
    slot: Slot[str] = Slot("example", "An example.")
    slot.install("first")
    slot.install("second")
    assert slot.get() == "second"
    slot.clear()
    assert slot.get() is None
    with pytest.raises(RuntimeError, match=r"Nothing is installed in example"):
        slot.require()


def test_a_hook_adds_once_keeps_order_and_removes():
    hook: Hook[str] = Hook("example", "An example.")
    assert hook.add("a") and hook.add("b") and hook.add("c")
    assert not hook.add("a")  # idempotent: "a" keeps its place
    assert list(hook) == ["a", "b", "c"]
    assert list(reversed(hook)) == ["c", "b", "a"]
    hook.remove("b")
    hook.remove("absent")  # nothing to remove: nothing happens
    assert list(hook) == ["a", "c"] and len(hook) == 2 and "a" in hook and "b" not in hook
    assert "example (An example.): 2 callbacks" in repr(hook)


def test_a_hook_run_sees_a_snapshot():
    hook: Hook[str] = Hook("example", "An example.")
    hook.add("a")
    seen = []
    for name in hook:
        hook.add("late")  # a callback that adds another: the next run sees it, this one not
        seen.append(name)
    assert seen == ["a"]
    assert list(hook) == ["a", "late"]


ROOT = Path(__file__).resolve().parents[2]


def _module_names() -> set[str]:
    names = set()
    for path in (ROOT / "monarch").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.add(".".join(parts).removesuffix(".__init__"))
    return names


def _patches(tree: ast.AST, bound: dict[str, str]) -> list[ast.stmt | ast.expr]:
    """Statements that assign an attribute of a name bound to a monarch module, or append to
    one's list; a function's own parameter of that name is not the module."""
    found: list[ast.stmt | ast.expr] = []

    def visit(node: ast.AST, shadowed: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            shadowed = shadowed | {p.arg for p in params if p is not None}
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("append", "extend", "insert")):
            targets = [node.func.value]
        for target in targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id in bound and target.value.id not in shadowed):
                assert isinstance(node, (ast.stmt, ast.expr))
                found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child, shadowed)

    visit(tree, frozenset())
    return found


def test_no_module_patches_another_monarch_module():
    """A module plugs into another only through a declared `Slot` or `Hook`: no assignment to
    another monarch module's attribute (`module.attr = fn`), no append to its lists."""
    modules = _module_names()
    found = []
    for path in sorted((ROOT / "monarch").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        bound: dict[str, str] = {}  # local name -> the monarch module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in modules:
                        bound[alias.asname or alias.name] = full
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
                  for node in _patches(tree, bound)]
    assert found == []
