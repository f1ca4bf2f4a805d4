"""What `import monarch.actor` loads: none of the heavy dependencies, which are imported where
they are first used (checked in a fresh interpreter). Over plain tcp (the default transport) the
first `this_host()` and spawn do not bring Dask's comm layer either, in the controller or in the
procs (`transport/tcp.py`). Its time is a benchmark figure, not a test."""

from __future__ import annotations

import json
import os
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
    def f(self) -> list[str]:
        return [m for m in {heavy!r} if m in sys.modules]

procs = this_host().spawn_procs(per_host={{"procs": 1}})
in_proc = procs.spawn("a", A).f.call_one().get(timeout=60)
after_spawn = [m for m in {heavy!r} if m in sys.modules]
print(json.dumps([loaded, after_spawn, in_proc]))
procs.stop().get(timeout=60)
"""


def test_import_and_first_spawn_over_tcp_load_nothing_heavy() -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MONARCH_", "HYPERACTOR_"))}  # the default transport: tcp
    run = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY)],
                         capture_output=True, text=True, timeout=100, env=env)
    assert run.returncode == 0, run.stderr
    loaded, after_spawn, in_proc = json.loads(run.stdout.splitlines()[-1])
    assert loaded == []
    assert after_spawn == []  # the controller listened, connected and got a reply without Dask
    assert in_proc == []  # and so did the proc, forked from a zygote that preloaded no Dask


_NO_PROCESS_PROBE = """
import json, os
def children():
    pid = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass  # the process ended while we read it: not our child
    return found
import monarch.actor
after_import = children()
monarch.actor.this_host()
print(json.dumps([after_import, len(children())]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_import_starts_no_process_and_this_host_starts_the_fork_server() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MONARCH_PRESTART", "MONARCH_PROC")}
    run = subprocess.run([sys.executable, "-c", _NO_PROCESS_PROBE], capture_output=True,
                         text=True, timeout=100, env=env)
    assert run.returncode == 0, run.stderr
    after_import, after_this_host = json.loads(run.stdout.splitlines()[-1])
    assert after_import == []  # importing has no side effect beyond definitions
    assert after_this_host == 1  # the first use of the local host starts its zygote
