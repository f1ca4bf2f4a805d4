"""A process that spawns and stops meshes for a long time does not grow: what it keeps per mesh
(the owner's proc-mesh registry, the ownership tree, the message counters, the proc table's
actor meshes, the owner's `owned_meshes`) is forgotten once a stopped mesh's actors or procs
are gone.

1,000 cycles of spawning, calling and stopping a two-actor mesh; every tenth cycle also stops
its proc mesh and spawns a new one (100 proc-mesh cycles). The resident set size, sampled every
100 cycles, is compared between cycle 500 and cycle 1,000: it settles over the first few hundred
cycles (imports, caches, the allocator's arenas), then stays flat. A proc mesh's table is
also held by its spawn watch until `mesh_proc_spawn_max_idle` passed (a timer, not a registry):
the test shortens it so that what is held in flight is the same few tables at both points.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from monarch._src.mesh import proc_mesh as proc_mesh_module, traffic
from monarch._src.mesh.context import current_instance
from monarch._src.mesh.ownership import tree
from monarch.actor import Actor, endpoint, this_host
from monarch.config import configured

pytestmark = pytest.mark.timeout(120)

CYCLES = 1000
PROC_MESH_EVERY = 10
# Seen between cycle 500 and 1,000: under 0.2 MiB (up to 8 MiB more while warming up, before
# cycle 400); what a kept proc table, its futures and meshes add per cycle adds up beyond this.
RSS_NOISE_KIB = 4 * 1024
SETTLED = 4  # rss[SETTLED] is the sample at cycle 500
TIMEOUT = 30.0


class Ping(Actor):
    @endpoint
    def ping(self) -> int:
        return 1


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def _kept() -> dict[str, int]:
    """How many entries each per-mesh registry of this process holds."""
    return {
        "proc mesh registry": len(proc_mesh_module._registry),
        "ownership tree": len(tree),
        "message counters": len(traffic.sent) + len(traffic.answered),
        "owned meshes": len(current_instance().owned_meshes),
    }


def test_spawn_stop_cycles_leave_no_entry_and_no_rss_growth() -> None:
    with configured(mesh_proc_spawn_max_idle="5s"):
        _cycles()


def _cycles() -> None:
    host = this_host()
    before = _kept()
    procs: Any = None
    rss: list[int] = []  # every 100 cycles, from cycle 100
    for cycle in range(1, CYCLES + 1):
        if procs is None or cycle % PROC_MESH_EVERY == 1:
            if procs is not None:
                procs.stop().get(timeout=TIMEOUT)
            procs = host.spawn_procs(per_host={"gpus": 2})
        actors = procs.spawn("pinged", Ping)
        assert list(actors.ping.call().get(timeout=TIMEOUT).values()) == [1, 1]
        actors.stop().get(timeout=TIMEOUT)
        table = proc_mesh_module.proc_table(procs)
        assert table.actor_meshes == [] and table.actor_displays == {}
        if cycle % 100 == 0:
            # Collected as it goes: garbage left for the collector's own schedule would show
            # as growth (and fragment the heap) without being kept by anything.
            gc.collect()
            rss.append(_rss_kib())
    procs.stop().get(timeout=TIMEOUT)
    assert _kept() == before
    growth = rss[-1] - rss[SETTLED]
    assert growth < RSS_NOISE_KIB, f"RSS (KiB) every 100 cycles from cycle 100: {rss}"
