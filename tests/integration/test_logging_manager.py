"""torchmonarch's log manager of a proc mesh (`ProcMesh._logging_manager`,
`monarch._src.actor.logging`): flushing held output on demand, sync, async and for all meshes.

Each case runs a client script in a subprocess with log forwarding on and reads its stdout: a
flush must bring out lines held under a long aggregation window before the marker printed after
it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

_SCRIPT = textwrap.dedent(
    """
    import asyncio
    from monarch.actor import Actor, endpoint, this_host
    from monarch._src.actor.logging import flush_all_proc_mesh_logs
    from monarch._src.actor.proc_mesh import get_active_proc_meshes

    class Talker(Actor):
        @endpoint
        def talk(self, word, n):
            for _ in range(n):
                print(word, flush=True)

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    talker = procs.spawn("talker", Talker)
    manager = procs._logging_manager
    assert manager is procs._logging_manager
    assert manager._logging_mesh_client is not None
    assert procs.slice(gpus=0)._logging_manager._logging_mesh_client is None
    assert get_active_proc_meshes() == [procs]
    asyncio.run(procs.logging_option(stream_to_client=True, aggregate_window_sec=600))
    talker.talk.call("held-sync", 5).get()
    manager.flush()
    print("AFTER-SYNC", flush=True)
    talker.talk.call("held-async", 5).get()

    async def flush_on_a_loop():
        await manager.flush_async()

    asyncio.run(flush_on_a_loop())
    print("AFTER-ASYNC", flush=True)
    talker.talk.call("held-all", 5).get()
    flush_all_proc_mesh_logs()
    print("AFTER-ALL", flush=True)
    procs.stop().get()
    assert get_active_proc_meshes() == []
    print("END", flush=True)
    """
)


def test_logging_manager_flushes_held_lines_sync_async_and_for_all_meshes() -> None:
    env = dict(os.environ, MONARCH_ENABLE_LOG_FORWARDING="1")
    result = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                            text=True, timeout=100)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()

    def where(predicate: object) -> int:
        return next(i for i, line in enumerate(lines) if predicate(line))  # type: ignore[operator]

    for word, marker in (("held-sync", "AFTER-SYNC"), ("held-async", "AFTER-ASYNC"),
                         ("held-all", "AFTER-ALL")):
        held = where(lambda line, w=word: "[10 similar log lines]" in line and w in line)
        assert held < lines.index(marker), result.stdout
    assert lines[-1] == "END", result.stdout
