"""torchmonarch's `monarch._src.actor.debugger` package: the distributed debugger, whose code is
`monarch._src.debug` (these modules name its parts under torchmonarch's paths)."""
