"""Every config key acts or is inert, and the docs count the keys right.

"Acts" is checked on the code, statically: a key that is not inert must be passed to one of
the config readers (`monarch._src.config.get` / `duration_seconds`) by some module outside
`monarch/_src/config/`. A key name that only appears in a string (an error message, a dict of
defaults) is not a read. The readers are also called with a variable in a few places (a key name
given to a constructor, a loop over key names); such a variable's keys are the string literals
bound to its name: a keyword argument of that name anywhere, an assignment to it, or the tuple a
loop over it iterates. That inert keys warn when set is tested per key in test_config.py.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from monarch._src.config.registry import INERT, KEYS

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "monarch"
CONFIG_PKG = PKG / "_src" / "config"
READERS = frozenset({"get", "duration_seconds"})  # monarch._src.config's value readers


def _reader_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(local names bound to a reader, local names bound to the monarch._src.config module)."""
    readers: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "monarch._src.config":
            readers |= {a.asname or a.name for a in node.names if a.name in READERS}
        elif isinstance(node, ast.ImportFrom) and node.module == "monarch._src":
            modules |= {a.asname or a.name for a in node.names if a.name == "config"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names
                        if a.name == "monarch._src.config" and a.asname}
    return readers, modules


def _is_reader(func: ast.expr, readers: set[str], modules: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in readers
    if isinstance(func, ast.Attribute) and func.attr in READERS:
        owner = ast.unparse(func.value)
        return owner in modules or owner == "monarch._src.config"
    return False


def _strings(node: ast.expr) -> list[str]:
    """The string constants `node` is, or holds as a tuple, list or set literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def _target_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def key_reads(sources: Iterable[str]) -> set[str]:
    """The key names the modules `sources` read through the config readers (see the module
    docstring for what counts)."""
    direct: set[str] = set()
    carriers: set[str] = set()  # names of variables passed to a reader
    bound: dict[str, set[str]] = {}  # variable name -> string literals bound to it
    for source in sources:
        tree = ast.parse(source)
        readers, modules = _reader_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg is not None:
                        bound.setdefault(kw.arg, set()).update(_strings(kw.value))
                if _is_reader(node.func, readers, modules) and node.args:
                    arg = node.args[0]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        direct.add(arg.value)
                    elif (name := _target_name(arg)) is not None:
                        carriers.add(name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if (name := _target_name(target)) is not None:
                        bound.setdefault(name, set()).update(_strings(node.value))
            elif (isinstance(node, (ast.For, ast.comprehension))
                  and (name := _target_name(node.target)) is not None):
                bound.setdefault(name, set()).update(_strings(node.iter))
    return direct | {key for name in carriers for key in bound.get(name, ())}


def unread_keys(keys: Iterable[str], inert: frozenset[str], sources: Iterable[str]) -> list[str]:
    """The keys of `keys` that are neither inert nor read by `sources`."""
    read = key_reads(sources)
    return sorted(name for name in keys if name not in inert and name not in read)


def _runtime_sources() -> list[str]:
    return [path.read_text() for path in sorted(PKG.rglob("*.py"))
            if CONFIG_PKG not in path.parents]


def test_every_settable_key_is_read_by_the_runtime() -> None:
    assert unread_keys(KEYS, INERT, _runtime_sources()) == []


def test_no_inert_key_is_read_by_the_runtime() -> None:
    # An inert key changes nothing: code reading it would make it act (then it is not inert).
    assert sorted(key_reads(_runtime_sources()) & INERT) == []


def test_every_key_read_is_registered() -> None:
    assert sorted(key_reads(_runtime_sources()) - set(KEYS)) == []


def test_unread_keys_key_defined_but_never_read_is_reported() -> None:
    # A key in the table with no reader, named in code only as a string (an error message, a
    # table of names): the check must report it, and the real keys stay read.
    mention = 'raise ValueError("set fake_never_read_key instead")\nNAMES = ["fake_never_read_key"]'
    keys = [*KEYS, "fake_never_read_key"]
    assert unread_keys(keys, INERT, [*_runtime_sources(), mention]) == ["fake_never_read_key"]


@pytest.mark.parametrize(
    "source",
    [
        "from monarch._src.config import get as config_get\nx = config_get('fake_key')",
        "from monarch._src.config import duration_seconds\nx = duration_seconds('fake_key')",
        "from monarch._src import config\nx = config.get('fake_key')",
        # A key name handed to an object that reads it later.
        ("from monarch._src.config import duration_seconds\n"
         "class M:\n    def __init__(self, every):\n        self.every = every\n"
         "    def wait(self):\n        return duration_seconds(self.every)\n"
         "m = M(every='fake_key')"),
        "from monarch._src.config import get\nv = [get(k) for k in ('other', 'fake_key')]",
    ],
)
def test_key_reads_read_through_a_reader_is_found(source: str) -> None:
    assert "fake_key" in key_reads([source])


@pytest.mark.parametrize(
    "source",
    [
        "x = {'fake_key': 1}",
        "from monarch._src.config import get\nx = get('other')\nmessage = 'set fake_key'",
        "import os\nx = os.environ.get('fake_key')",  # a `get` that is not the config reader
    ],
)
def test_key_reads_name_without_reader_call_is_not_a_read(source: str) -> None:
    assert "fake_key" not in key_reads([source])


# -- the counts the docs give ----------------------------------------------------------------


def _keys_of_0_7_0() -> list[str]:
    """torchmonarch 0.7.0's keys, as the compat program lists them (read, not run)."""
    tree = ast.parse((ROOT / "tests/compat/programs/config_api.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "KEYS_0_7_0":
            names = ast.literal_eval(node.value)
            assert isinstance(names, list)
            return names
    raise AssertionError("tests/compat/programs/config_api.py has no KEYS_0_7_0 list")


def test_readme_config_counts_match_the_registry() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    found = re.search(r"all (\d+) config keys of 0\.7\.0 are known; (\d+) of our (\d+) have no "
                      r"meaning here", text)
    assert found, "README.md no longer says how many config keys are known and inert"
    ours_0_7_0 = [name for name in _keys_of_0_7_0() if name in KEYS]
    assert tuple(map(int, found.groups())) == (len(ours_0_7_0), len(INERT), len(KEYS))


def test_docs_inert_counts_match_the_registry() -> None:
    text = " ".join((ROOT / "docs" / "configuration.md").read_text().split())
    # The en dash is the guide's, in its table of keys.
    found = re.search(
        r"\| inert \((\d+)\) \| – \| (.*?), and the (\d+) further keys", text  # noqa: RUF001
    )
    assert found, "docs/configuration.md's table of keys has no 'inert (N)' row"
    named = re.findall(r"`(\w+)`", found.group(2))
    assert set(named) <= INERT
    assert (int(found.group(1)), int(found.group(3))) == (len(INERT), len(INERT) - len(named))
