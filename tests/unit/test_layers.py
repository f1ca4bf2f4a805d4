"""The layering of ARCHITECTURE.md, checked on every import (module level or inside a function).

Packages, from the bottom up (a package may import its own layer's leaves and anything below it):

    shape, config, supervision,  stdlib only
    telemetry, procstat
    transport
    runtime
    mesh
    hosts
    lowlevel                     the extension surface features use
    features                     rdma, tensor, simulator, job, spmd, debug, admin, dashboard
    top                          facades (monarch, monarch.actor, ...), notebook, tools, wiring

Between features only the edges of FEATURE_DEPS are allowed. The modules that keep
torchmonarch's private import paths of `monarch.actor` (`monarch._src.actor.*`) are facades.
Checked here: no import goes up a layer or across features outside FEATURE_DEPS; no
cycle between packages; nothing under `monarch._src` but those imports a public facade;
features (and the notebook) reach the runtime, the transport and the mesh's seams only through
`monarch._src.lowlevel`; no underscore name imported across packages; no underscore attribute
read on another package's object (an attribute named `_x` read from something other than
`self`/`cls`, where only other packages define `_x`).
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "monarch"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"shape", "config", "supervision", "telemetry", "procstat"}),
    frozenset({"transport"}),
    frozenset({"runtime"}),
    frozenset({"mesh"}),
    frozenset({"hosts"}),
    frozenset({"lowlevel"}),
    frozenset({"rdma", "tensor", "simulator", "job", "spmd", "debug", "admin", "dashboard",
               "mount"}),
    frozenset({"top"}),
)
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
FEATURES = LAYERS[RANK["tensor"]]
# The feature-to-feature imports allowed (a DAG): the simulator is a tensor engine, SPMD jobs
# are jobs, the debugger is served by the admin control server, a job starts its admin API
# (`enable_admin`), mounts its dashboard on its telemetry server (`include_dashboard`) and
# opens the FUSE mounts it declares (`remote_mount`, `gather_mount`).
FEATURE_DEPS = {"simulator": {"tensor"}, "spmd": {"job"}, "debug": {"admin"},
                "job": {"admin", "dashboard", "mount"}}
# torchmonarch's private paths of monarch.actor: thin re-export modules that import the facade
# first (its import-time effects), facades by role; and of monarch.rdma's Python API, which sits
# over the binding layer (`monarch._rust_bindings.rdma`) as on Monarch.
FACADE_MODULES = ("monarch._src.actor", "monarch._src.rdma.rdma", "monarch._src.gather_mount")


def package_of(module: str) -> str | None:
    """The layering package of a `monarch` module name; None outside monarch."""
    parts = module.split(".")
    if parts[0] != "monarch":
        return None
    if any(module == m or module.startswith(m + ".") for m in FACADE_MODULES):
        return "top"
    if len(parts) >= 3 and parts[1] == "_src":
        return "top" if parts[2] == "wiring" else parts[2]
    return "top"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(module: str, tree: ast.AST) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import in the module."""
    is_pkg = MODULES[module].name == "__init__.py"
    found: list[tuple[str, str | None, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_pkg else -1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in MODULES:  # `from package import module`
                    found.append((full, None, node.lineno))
                else:
                    found.append((source, alias.name, node.lineno))
    return found


def _cross_imports() -> list[tuple[str, str, str, str | None, int]]:
    """(from package, to package, module, imported, name, line) for imports between packages."""
    edges = []
    for module, tree in TREES.items():
        src = package_of(module)
        for target, name, line in _imports(module, tree):
            dst = package_of(target)
            if dst is not None and dst != src:
                edges.append((src, dst, module, target, name, line))
    return edges


def _allowed(src: str, dst: str) -> bool:
    if src in FEATURES and dst in FEATURES:
        return dst in FEATURE_DEPS.get(src, ())
    if src == "top":
        return True
    return RANK[dst] < RANK[src] or RANK[dst] == RANK[src] == 0


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_package_has_a_layer():
    unknown = {package_of(m) for m in MODULES} - set(RANK)
    assert not unknown, f"packages with no layer in tests/unit/test_layers.py: {sorted(unknown)}"


def test_imports_follow_the_layers():
    wrong = [
        f"{module}:{line} ({src}) imports {target} ({dst})"
        for src, dst, module, target, _, line in _cross_imports()
        if not _allowed(src, dst)
    ]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def _unit(module: str) -> str:
    """The node of the cycle check: a package, and for the top layer each facade on its own
    (`monarch.actor`, `monarch.tools`, `monarch._src.wiring`, ...)."""
    pkg = package_of(module) or ""
    if pkg != "top":
        return pkg
    parts = module.split(".")
    return ".".join(parts[:3] if parts[1] == "_src" else parts[:2])


def test_no_cycle_between_packages():
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for module, tree in TREES.items():
        for target, _, _ in _imports(module, tree):
            if package_of(target) is not None and _unit(target) != _unit(module):
                graph[_unit(module)].add(_unit(target))
    cycles = [c for c in _sccs(graph) if len(c) > 1]
    assert not cycles, f"import cycles between packages: {cycles}"


def test_src_never_imports_a_public_facade():
    """The facades (`monarch.rdma`, `monarch.config`, ...) import `monarch._src`, never the
    reverse: an implementation module importing its own facade is a cycle the package graph
    above does not see (the facade is its own node)."""
    wrong = [
        f"{module}:{line} imports {target}"
        for module, tree in TREES.items()
        if module.startswith("monarch._src.") and package_of(module) != "top"
        for target, _, line in _imports(module, tree)
        if target.startswith("monarch") and not target.startswith("monarch._src")
    ]
    assert not wrong, "implementation modules importing a public facade:\n" + "\n".join(wrong)


def test_no_private_name_imported_across_packages():
    wrong = [
        f"{module}:{line} imports {name or target.rsplit('.', 1)[-1]} from {target}"
        for _, _, module, target, name, line in _cross_imports()
        if _private(name or "") or (name is None and _private(target.rsplit(".", 1)[-1]))
    ]
    assert not wrong, "private names across packages:\n" + "\n".join(wrong)


# What features reach only through monarch._src.lowlevel (the extension surface): the runtime and
# transport, and the mesh's seams. The programming model itself (Actor, endpoint, context, the
# meshes) they import from its home, as users do.
SURFACE_ONLY = (
    "monarch._src.runtime",
    "monarch._src.transport",
    "monarch._src.mesh.casting",
    "monarch._src.mesh.hooks",
    "monarch._src.mesh.host_agent",
    "monarch._src.mesh.rank_state",
)


def test_features_use_the_extension_surface():
    wrong = [
        f"{module}:{line} imports {target} (use monarch._src.lowlevel)"
        for src, _, module, target, _, line in _cross_imports()
        if (src in FEATURES or module.startswith("monarch.notebook"))
        and any(target == m or target.startswith(m + ".") for m in SURFACE_ONLY)
    ]
    assert not wrong, "features past the extension surface:\n" + "\n".join(wrong)


def _defined_private_names() -> dict[str, set[str]]:
    """For each package, the underscore names it defines (functions, classes, attributes
    assigned, names bound, parameters, `__slots__` strings)."""
    defined: dict[str, set[str]] = collections.defaultdict(set)
    for module, tree in TREES.items():
        names = defined[package_of(module) or ""]
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = node.attr
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                name = node.id
            elif isinstance(node, ast.arg):
                name = node.arg
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                name = node.value
            else:
                continue
            if _private(name) and name.isidentifier():
                names.add(name)
    return defined


def test_no_private_attribute_read_across_packages():
    defined = _defined_private_names()
    owners: dict[str, set[str]] = collections.defaultdict(set)
    for pkg, names in defined.items():
        for name in names:
            owners[name].add(pkg)
    wrong = []
    for module, tree in TREES.items():
        pkg = package_of(module) or ""
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and node.attr not in defined[pkg]
                and owners.get(node.attr)
            ):
                wrong.append(
                    f"{module}:{node.lineno} reads .{node.attr} "
                    f"(defined in {', '.join(sorted(owners[node.attr]))})"
                )
    assert not wrong, "private attributes read across packages:\n" + "\n".join(wrong)


# ---- the order inside monarch/_src/mesh -------------------------------------------------------
# Records and mechanisms both sides use, then the proc runtime (the callee side: what runs the
# actors of a process), then the caller's handles (meshes, endpoints, the casting seam). The
# callee side and the caller side each import only their own tier and the shared one: neither
# imports the other. Imports needed only for type checking are not counted. The package's
# `__init__` (which loads the proc agent and the controller registry) is outside the order.
MESH_TIERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("shared", frozenset({
        "actor", "context", "control_ops", "hooks", "html", "inbox", "interruption",
        "log_prefix", "logs", "observe", "ownership", "port", "rank_state", "relay",
        "returns_future", "spawn_info", "telemetry", "traffic", "value_mesh",
    })),
    ("callee", frozenset({"agent", "cancellation", "hosted", "upgrade"})),
    ("caller", frozenset({
        "accumulator", "actor_mesh", "call_future", "casting", "controller", "endpoint",
        "host_agent", "host_mesh", "lifecycle", "native", "proc_mesh", "upgrade_caller",
    })),
)
MESH = "monarch._src.mesh"
TIER = {f"{MESH}.{m}": name for name, mods in MESH_TIERS for m in mods}
# What each tier may import, besides itself.
TIER_MAY_IMPORT = {"shared": set(), "callee": {"shared"}, "caller": {"shared"}}


def _runtime_imports(module: str) -> list[tuple[str, int]]:
    """The mesh modules `module` imports when it runs (at module level or inside a function;
    not under `if TYPE_CHECKING:`)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(ast.Module(body=child.orelse, type_ignores=[]))
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                holder = ast.Module(body=[child], type_ignores=[])
                found.extend((target if target in TIER else f"{target}.{name}", line)
                             for target, name, line in _imports(module, holder))
            else:
                visit(child)

    visit(TREES[module])
    return [(target, line) for target, line in found if target in TIER]


def test_every_mesh_module_has_a_tier():
    mesh = {m for m in MODULES if m.startswith(f"{MESH}.")}
    unknown = sorted(mesh - set(TIER))
    assert not unknown, f"mesh modules with no tier in MESH_TIERS: {unknown}"


def test_mesh_imports_follow_the_tiers():
    wrong = []
    for module in TIER:
        tier = TIER[module]
        for target, line in _runtime_imports(module):
            if TIER[target] != tier and TIER[target] not in TIER_MAY_IMPORT[tier]:
                wrong.append(f"{module}:{line} ({tier}) imports {target} ({TIER[target]})")
    assert not wrong, "imports against the mesh tiers:\n" + "\n".join(wrong)


def test_no_cycle_in_the_shared_and_callee_tiers():
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for module in TIER:
        if TIER[module] != "caller":
            graph[module] |= {t for t, _ in _runtime_imports(module) if t != module}
    cycles = [c for c in _sccs(graph) if len(c) > 1]
    assert not cycles, f"import cycles in the mesh's shared and callee tiers: {cycles}"


if __name__ == "__main__":  # `python tests/unit/test_layers.py`: the mesh's import graph by tier
    for tier_name, tier_modules in MESH_TIERS:
        print(f"{tier_name}:")
        for name in sorted(tier_modules):
            module = f"{MESH}.{name}"
            if module in TREES:
                imported = sorted({t.rsplit(".", 1)[1] for t, _ in _runtime_imports(module)}
                                  - {name})
                print(f"  {name:15} -> {', '.join(imported) or '-'}")
