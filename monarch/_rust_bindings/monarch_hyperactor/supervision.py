"""`SupervisionError` and `MeshFailure` under torchmonarch's import path."""

from monarch._src.supervision.errors import MeshFailure, SupervisionError

__all__ = ["MeshFailure", "SupervisionError"]
