"""monarch.job.spmd: a torchrun command line as a monarch job (`serve`, `SPMDJob`)."""

from monarch._src.spmd.serve import SPMDJob, serve

__all__ = ["SPMDJob", "serve"]
