"""`serve(["torchrun", ...])`: a torchrun command line as a monarch job (`monarch.job.spmd`).

The torchrun options pick the shape (`--nnodes` hosts x `--nproc-per-node` procs); the rest is
the script and its arguments. `SPMDJob.run_spmd()` spawns the procs on the job's `workers` mesh
and runs the script on each through `SPMDActor.main`. Schedulers: "local" (one node: this
machine; several nodes: one worker process per node, a `ProcessJob`). torchx app definitions
and remote schedulers are not available.
"""

from __future__ import annotations

from typing import Any

from monarch._src.job.job import JobTrait
from monarch._src.job.state import JobState
from monarch._src.spmd.actor import SPMD_ACTOR_NAME, SPMDActor

__all__ = ["SPMDJob", "parse_torchrun", "serve"]

# Bound on a whole SPMD run.
_RUN_TIMEOUT = 3600.0


def parse_torchrun(cmd: list[str]) -> tuple[int, int, list[str]]:
    """(nnodes, nproc_per_node, script args) from a `torchrun ...` command list."""
    if not cmd or cmd[0] != "torchrun":
        raise ValueError(f"serve expects a command list starting with 'torchrun', got {cmd!r}.")
    nnodes, nproc = 1, 1
    args = list(cmd[1:])
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-m":
        opt = args[i]
        key, eq, value = opt.partition("=")
        key = key.lstrip("-").replace("_", "-")
        if key in ("standalone",):
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                raise ValueError(f"torchrun option {opt!r} needs a value.")
            value = args[i + 1]
            i += 1
        i += 1
        if key == "nnodes":
            if ":" in value:
                raise ValueError("serve does not support elastic --nnodes=MIN:MAX; give a number.")
            nnodes = int(value)
        elif key == "nproc-per-node":
            nproc = int(value)
        # other torchrun options (rdzv, master addr/port, ...) are decided by monarch
    script = args[i:]
    if not script:
        raise ValueError(f"torchrun command {cmd!r} names no script to run.")
    return nnodes, nproc, script


class SPMDJob(JobTrait):
    """A job running one torchrun-style script on `nnodes` x `nproc_per_node` procs."""

    def __init__(self, inner: JobTrait, nproc_per_node: int, script_args: list[str]) -> None:
        super().__init__()
        self._inner = inner
        self._nproc = nproc_per_node
        self._script = list(script_args)

    def can_run(self, spec: JobTrait) -> bool:
        """True for the same script and shape while the inner job can serve it."""
        return (isinstance(spec, SPMDJob) and spec._nproc == self._nproc
                and spec._script == self._script and self._inner.can_run(spec._inner))

    def _create(self, client_script: str | None) -> None:
        self._inner.apply(client_script)

    def _state(self) -> JobState:
        return self._inner._state()

    def _kill(self) -> None:
        if self._inner.active:
            self._inner.kill()

    def run_spmd(self, timeout: float = _RUN_TIMEOUT) -> Any:
        """Run the script on every proc; returns the `ValueMesh` of `True`s (raises on failure)."""
        state = self.state(cached_path=None)
        procs = state.workers.spawn_procs(per_host={"gpus": self._nproc}, name="spmd")
        try:
            actors = procs.spawn(SPMD_ACTOR_NAME, SPMDActor)
            first = actors.slice(**{k: 0 for k in actors.sizes}) if actors.sizes else actors
            addr, port = first.get_host_port.call_one(None).get(timeout=60.0)
            return actors.main.call(addr, port, self._script).get(timeout=timeout)
        finally:
            procs.stop().get(timeout=60.0)


def serve(appdef: Any, scheduler: str = "local", scheduler_cfg: dict[str, Any] | None = None
          ) -> SPMDJob:
    """An `SPMDJob` for a `["torchrun", ...]` command list (applied on first `state()`)."""
    if not isinstance(appdef, list):
        raise NotImplementedError(
            "serve takes a torchrun command list such as ['torchrun', '--nproc-per-node=2', "
            "'train.py']; torchx AppDefs are not available in this version.")
    if scheduler not in ("local", "local_cwd"):
        raise NotImplementedError(
            f"serve scheduler {scheduler!r} is not available; use scheduler='local', or build a "
            "SlurmJob/DaskJob and run SPMDActor.main on its procs.")
    nnodes, nproc, script = parse_torchrun([str(a) for a in appdef])
    if nnodes == 1:
        from monarch._src.job.local import LocalJob

        inner: JobTrait = LocalJob(hosts=("workers",))
    else:
        from monarch._src.job.process import ProcessJob

        inner = ProcessJob({"workers": nnodes}, env=(scheduler_cfg or {}).get("env"))
    return SPMDJob(inner, nproc, script)
