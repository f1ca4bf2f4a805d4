"""torchmonarch's `monarch_hyperactor.selection`: `Selection` (the tensor engine's name, which
raises on use with what to do instead: slice meshes with `mesh.slice(**dims)`)."""

from monarch._src.tensor.unsupported import Selection

__all__ = ["Selection"]
