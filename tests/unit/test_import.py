"""What `import monarch.actor` loads: none of the heavy dependencies, which are imported where
they are first used (checked in a fresh interpreter). Its time is a benchmark figure, not a test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

HEAVY = ("distributed", "dask", "tornado", "numpy", "torch", "ipywidgets", "IPython")

_PROBE = """
import json, sys
import monarch.actor
loaded = [m for m in {heavy!r} if m in sys.modules]
from monarch.actor import Actor, endpoint, this_host

class A(Actor):
    @endpoint
    def f(self) -> int:
        return 1

procs = this_host().spawn_procs(per_host={{"procs": 1}})
value = procs.spawn("a", A).f.call_one().get(timeout=60)
print(json.dumps([loaded, "distributed" in sys.modules, value]))
procs.stop().get(timeout=60)
"""


def test_import_loads_nothing_heavy_and_the_first_spawn_brings_the_transport() -> None:
    run = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY)],
                         capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr
    loaded, transport_loaded, value = json.loads(run.stdout.splitlines()[-1])
    assert loaded == []
    assert transport_loaded and value == 1
