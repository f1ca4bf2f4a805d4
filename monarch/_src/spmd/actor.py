"""`SPMDActor` and `setup_torch_elastic_env`: the torchrun environment on every proc of a mesh.

torchrun starts N copies of a script and tells each who it is through environment variables.
Here the proc mesh is the set of copies: an `SPMDActor` on every proc derives the same variables
from its rank in the mesh (the last dimension plays the role of the processes on one node) and
either writes them into its proc's `os.environ` (`setup_env`, for actors spawned afterwards) or
also runs the script in-process as `__main__` (`main`). A script that kills its process turns
into the usual supervision event for that rank.
"""

from __future__ import annotations

import os
import runpy
import socket
import sys
from typing import Any

from monarch._src.hosts.addresses import free_port
from monarch._src.job.torchrun import torch_elastic_env
from monarch._src.mesh.actor import Actor, endpoint
from monarch._src.mesh.context import current_rank
from monarch._src.mesh.proc_mesh import ProcMesh

__all__ = [
    "SPMDActor",
    "setup_torch_elastic_env",
    "setup_torch_elastic_env_async",
]

# Name under which the actor is conventionally spawned.
SPMD_ACTOR_NAME = "_SPMDActor"


class SPMDActor(Actor):
    """One per proc: knows its torchrun identity, sets it in the environment, runs scripts."""

    def __init__(self) -> None:
        point = current_rank()
        # The torchrun variables of this proc (no MASTER_* until setup_env/main).
        self.env = torch_elastic_env(point.rank, list(point.extent.sizes))

    @endpoint
    def get_host_port(self, use_ipaddr: bool | None = None) -> tuple[str, int]:
        """This host's name (or IP address with `use_ipaddr`) and a free TCP port on it."""
        host = socket.gethostname()
        if use_ipaddr:
            host = socket.gethostbyname(host)
        return host, free_port()

    @endpoint
    def setup_env(self, master_addr: str, master_port: int) -> None:
        """Write the torchrun variables into this proc's `os.environ`."""
        os.environ.update(self.env)
        os.environ["MASTER_ADDR"] = str(master_addr)
        os.environ["MASTER_PORT"] = str(master_port)

    @endpoint
    def main(self, master_addr: str, master_port: int, script_args: list[str]) -> bool:
        """Set the environment, then run `script_args` (`["path.py", ...]` or `["-m", "mod",
        ...]`) as `__main__` in this proc, with `sys.argv` set; returns True when it finished.

        A script that exits with a non-zero status raises `RuntimeError` (an `ActorError` for the
        caller); one that ends its process becomes a supervision event for this rank.
        """
        if not script_args:
            raise ValueError(
                "SPMDActor.main needs the script to run, e.g. ['train.py', '--lr', '0.1'] or "
                "['-m', 'pkg.train']; got an empty list."
            )
        os.environ.update(self.env)
        os.environ["MASTER_ADDR"] = str(master_addr)
        os.environ["MASTER_PORT"] = str(master_port)
        saved_argv = sys.argv
        try:
            if script_args[0] == "-m":
                if len(script_args) < 2:
                    raise ValueError("SPMDActor.main got '-m' without a module name.")
                sys.argv = [script_args[1], *script_args[2:]]
                runpy.run_module(script_args[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv = list(script_args)
                runpy.run_path(script_args[0], run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise RuntimeError(
                    f"SPMD script {script_args[0]!r} exited with status {exc.code!r} on rank "
                    f"{self.env['RANK']}."
                ) from None
        finally:
            sys.argv = saved_argv
        return True


def _check_addr_port(master_addr: str | None, master_port: int | None) -> None:
    # AssertionError, with torchmonarch's words, because code written for it may catch that.
    if (master_addr is None) != (master_port is None):
        raise AssertionError(
            "Either both master_addr and master_port must be specified or neither must be "
            "specified."
        )


def _rank0(mesh: Any) -> Any:
    return mesh.slice(**{label: 0 for label in mesh.sizes}) if mesh.sizes else mesh


async def setup_torch_elastic_env_async(
    proc_mesh: ProcMesh, master_addr: str | None = None, master_port: int | None = None,
    use_ipaddr: bool | None = None,
) -> None:
    """Spawn `_SPMDActor` on `proc_mesh` and set the torchrun variables on every proc.

    Without `master_addr`/`master_port`, the proc at the all-zeros point picks its host and a
    free port. Returns None (as torchmonarch's does).
    """
    _check_addr_port(master_addr, master_port)
    actors = proc_mesh.spawn(SPMD_ACTOR_NAME, SPMDActor)
    if master_addr is None:
        master_addr, master_port = await _rank0(actors).get_host_port.call_one(use_ipaddr)
    await actors.setup_env.call(master_addr, master_port)


def setup_torch_elastic_env(
    proc_mesh: ProcMesh, master_addr: str | None = None, master_port: int | None = None,
    use_ipaddr: bool | None = None,
) -> None:
    """Blocking form of `setup_torch_elastic_env_async`."""
    _check_addr_port(master_addr, master_port)
    actors = proc_mesh.spawn(SPMD_ACTOR_NAME, SPMDActor)
    if master_addr is None:
        master_addr, master_port = _rank0(actors).get_host_port.call_one(use_ipaddr).get()
    actors.setup_env.call(master_addr, master_port).get()
