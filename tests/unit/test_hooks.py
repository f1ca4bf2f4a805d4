"""The hook slots and what the wiring fills: checked in a fresh interpreter, so nothing another
test imported has filled a slot already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from monarch._src.mesh.hooks import Slot

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
