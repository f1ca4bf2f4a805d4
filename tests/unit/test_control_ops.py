"""Unit tests for typed control operations (`runtime/control.py`) and each layer's table of them.

No mailbox runs here: `ControlTable` resolves envelopes as the mailbox's loop does, and the
envelopes are checked for what they carry on the wire. `test_mailbox.py` covers dispatch
between two mailboxes.
"""

from __future__ import annotations

import importlib
import pathlib
import pickle
import re
from typing import Any, NamedTuple

import pytest

from monarch._src.runtime.control import (
    ControlTable,
    PortsHanded,
    control,
    control_op,
    op_name,
    record_of,
)
from monarch._src.runtime.envelope import CONTROL, Control

pytestmark = pytest.mark.timeout(60)

MONARCH = pathlib.Path(__file__).resolve().parents[2] / "monarch"
# Each layer's one table of control operations (the runtime's own are in runtime/control.py).
OP_MODULES = [
    "monarch._src.runtime.control",
    "monarch._src.mesh.control_ops",
    "monarch._src.hosts.control_ops",
    "monarch._src.admin.control_ops",
    "monarch._src.debug.control_ops",
    "monarch._src.rdma.control_ops",
]


@control_op("test_control_ops_move")
class _Move(NamedTuple):
    """A control operation of these tests."""

    key: str
    to: int


@control_op("test_control_ops_empty")
class _Empty(NamedTuple):
    """A control operation without fields."""


def _handler(peer: str, op: _Move, reply: Any) -> None:
    """A handler these tests register and never call."""


def _other_handler(peer: str, op: _Move, reply: Any) -> None:
    """A second handler for the same operation."""


def test_control_envelope_carries_wire_name_and_plain_fields() -> None:
    env = control(_Move("k", 3), ("tcp://a:1", 7))
    assert env == Control(CONTROL, "test_control_ops_move", ("k", 3), ("tcp://a:1", 7))
    assert type(env.fields) is tuple


def test_control_envelope_pickles_as_the_string_form_did() -> None:
    # The wire carries `tuple(env)`: a record costs nothing over the old (name, args) form.
    typed = pickle.dumps(tuple(control(_Move("k", 3))), protocol=5)
    plain = pickle.dumps((CONTROL, "test_control_ops_move", ("k", 3), None), protocol=5)
    assert typed == plain


def test_control_table_resolve_rebuilds_the_record() -> None:
    table = ControlTable()
    table.register(_Move, _handler)
    found = table.resolve(Control(CONTROL, "test_control_ops_move", ("k", 3), None))
    assert found is not None
    handler, op = found
    assert handler is _handler
    assert type(op) is _Move and op.key == "k" and op.to == 3


def test_control_table_resolve_unknown_operation_returns_none() -> None:
    table = ControlTable()
    table.register(_Move, _handler)
    assert table.resolve(Control(CONTROL, "from_a_newer_peer", (1,), None)) is None


def test_control_table_resolve_other_field_count_raises_naming_fields() -> None:
    table = ControlTable()
    table.register(_Move, _handler)
    with pytest.raises(ValueError, match=r"'test_control_ops_move' came with 3 fields where this "
                                         r"process expects 2 \(key, to\)"):
        table.resolve(Control(CONTROL, "test_control_ops_move", ("k", 3, "new"), None))


def test_control_table_register_twice_raises_naming_both_handlers() -> None:
    table = ControlTable()
    table.register(_Move, _handler)
    with pytest.raises(ValueError) as info:
        table.register(_Move, _other_handler)
    message = str(info.value)
    assert "'test_control_ops_move'" in message
    assert "_handler" in message and "_other_handler" in message
    assert table.handler(_Move) is _handler  # the first registration stands


def test_control_table_replace_swaps_and_returns_previous() -> None:
    table = ControlTable()
    table.register(_Move, _handler)
    assert table.replace(_Move, _other_handler) is _handler
    assert table.handler(_Move) is _other_handler
    assert _Move in table and _Empty not in table


def test_control_table_handler_of_unregistered_operation_raises_naming_it() -> None:
    with pytest.raises(KeyError, match="test_control_ops_empty"):
        ControlTable().handler(_Empty)


def test_control_op_wire_name_declared_twice_raises_naming_both_classes() -> None:
    class Other(NamedTuple):
        key: str

    with pytest.raises(TypeError) as info:
        control_op("test_control_ops_move")(Other)
    message = str(info.value)
    assert "_Move" in message and "Other" in message
    assert op_name(_Move) == "test_control_ops_move"


def test_control_of_undeclared_record_raises_naming_it() -> None:
    class Undeclared(NamedTuple):
        key: str

    with pytest.raises(TypeError, match="Undeclared is not a control operation"):
        control(Undeclared("k"))
    with pytest.raises(TypeError, match="Undeclared is not a control operation"):
        ControlTable().register(Undeclared, _handler)


def test_record_of_matching_and_other_operations() -> None:
    env = control(_Move("k", 3))
    assert record_of(env, _Move) == _Move("k", 3)
    assert type(record_of(env, _Move)) is _Move
    assert record_of(env, _Empty) is None


def test_control_ops_of_every_layer_are_declared_once_by_name() -> None:
    names: dict[str, str] = {}
    for module_name in OP_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            cls = getattr(module, name)
            if not (isinstance(cls, type) and issubclass(cls, tuple)):
                continue
            try:
                wire = op_name(cls)
            except TypeError:
                continue  # a shared base of records (hosts' ProcOutput), not an operation
            assert wire not in names, f"{wire} declared by {names[wire]} and {module_name}"
            names[wire] = module_name
    assert op_name(PortsHanded) == "ports_handed"
    assert {"spawn", "ping", "relay", "proc_ready", "host_attach", "stacks", "debug_input",
            "rdma_init"} <= set(names)


def _sources() -> list[tuple[pathlib.Path, str]]:
    return [(path, path.read_text(encoding="utf-8")) for path in sorted(MONARCH.rglob("*.py"))]


def test_no_module_builds_a_control_envelope_by_hand() -> None:
    # Senders build records and `control(record, reply)`; only runtime/control.py builds the
    # envelope itself.
    offenders = [str(path.relative_to(MONARCH)) for path, text in _sources()
                 if re.search(r"\bControl\(\s*CONTROL\b", text)
                 and path.relative_to(MONARCH).as_posix() != "_src/runtime/control.py"]
    assert offenders == []


def test_only_the_mailbox_reads_the_pending_prefix() -> None:
    # "Is this proc up?" is `ProcTable.is_up(rank)`; the key's form is the mailbox's.
    allowed = {"_src/runtime/mailbox.py"}
    offenders = [str(path.relative_to(MONARCH)) for path, text in _sources()
                 if ("PENDING_PREFIX" in text or '"pending:"' in text)
                 and path.relative_to(MONARCH).as_posix() not in allowed]
    assert offenders == []
