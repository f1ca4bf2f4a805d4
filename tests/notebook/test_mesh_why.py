"""`%mesh_why` against real procs: the hang-triage report of a mesh where one rank blocks in a
different function than the others. The magic is called on a `MeshMagics` of its own (as
`%mesh_result`'s usage test does), leaving IPython's global test shell to test_magics.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.debug.hang_actors import Releaser, Trainer

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_mesh_why_names_the_rank_in_another_function(procs4: Any,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from IPython.core.error import UsageError

    from monarch.notebook.magics import MeshMagics

    magics = MeshMagics(None)

    releaser = procs4.spawn("why_releaser", Releaser)
    releaser.reset.call().get(timeout=30)
    trainer = procs4.spawn("why_trainer", Trainer)
    pending = trainer.step.call(1)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the four ranks are inside their functions (a remote state)
            result = magics.mesh_why("--json")
            groups = [g for m in result["meshes"] if m["mesh"] == "why_trainer"
                      for g in m["groups"] if g["kind"] == "stack"]
            if sum(g["count"] for g in groups) == 4:
                break
            assert time.monotonic() < deadline, result
            time.sleep(0.05)  # poll interval of a bounded condition wait
        assert "3 ranks of why_trainer in `all_reduce`" in result["summary"]
        assert "rank 1 of why_trainer in `load_batch`" in result["summary"]
        capsys.readouterr()
        assert magics.mesh_why("--no-stacks") is None
        out = capsys.readouterr().out
        assert out.startswith("monarch why: ") and "! rank 1 of why_trainer in `load_batch`" in out
        with pytest.raises(UsageError, match="%mesh_why takes"):
            magics.mesh_why("--bogus")
    finally:
        releaser.release.call().get(timeout=30)
        pending.get(timeout=30)
        trainer.stop().get(timeout=30)
        releaser.stop().get(timeout=30)
