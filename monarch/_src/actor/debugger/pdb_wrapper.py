"""torchmonarch's `monarch._src.actor.debugger.pdb_wrapper`: the pdb that runs on a paused
actor's thread (`monarch._src.debug.actor_pdb.ActorPdb`)."""

from monarch._src.debug.actor_pdb import ActorPdb as PdbWrapper

__all__ = ["PdbWrapper"]
