"""Modules the zygote preloads for the procs (torch, numpy) are imported under the controller's
environment at the spawn that preloads them, not the one the zygote started with at the first
`this_host()`: a variable they read when they load, set in between, reaches the procs
as it would a proc that imported them itself (torchmonarch's procs start fresh)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]

_CONTROLLER = textwrap.dedent("""
    import os, sys
    import monarch.actor as actor
    actor.this_host()                              # the zygote starts now, without the variable
    from monarch._src.hosts import zygote_client
    zygote_client.PRELOADABLE = ("tests.hosts.envprobe",)
    os.environ["MONARCH_TEST_ENVPROBE"] = "set after import monarch.actor"
    import tests.hosts.envprobe                    # the controller uses it: the zygote preloads it

    class Probe(actor.Actor):
        @actor.endpoint
        def seen(self):
            preloaded = "tests.hosts.envprobe" in sys.modules  # forked with it, not imported here
            import tests.hosts.envprobe as probe
            return probe.SEEN, preloaded

    procs = actor.this_host().spawn_procs(per_host={"procs": 1})
    print("SEEN", procs.spawn("probe", Probe).seen.call_one().get(timeout=60), flush=True)
    procs.stop().get(timeout=60)
""")


def test_preloaded_modules_see_the_environment_of_the_spawn(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MONARCH_TEST_ENVPROBE"}
    env["PYTHONPATH"] = f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}"
    done = subprocess.run([sys.executable, "-c", _CONTROLLER], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SEEN ('set after import monarch.actor', True)" in done.stdout, done.stdout
