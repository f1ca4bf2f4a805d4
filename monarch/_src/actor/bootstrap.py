"""torchmonarch's `monarch._src.actor.bootstrap`: attaching to remote worker hosts."""

from monarch.actor import attach_to_workers, run_worker_loop_forever

__all__ = ["attach_to_workers", "run_worker_loop_forever"]
