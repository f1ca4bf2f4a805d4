"""torchmonarch's `monarch.common` paths of the tensor engine, for code written against them
(`from monarch.common.device_mesh import no_mesh`, say): each module re-exports this package's
names. New code imports them from `monarch`."""
