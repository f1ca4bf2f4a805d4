"""Import paths of torchmonarch's compiled bindings that user code imports directly.

torchmonarch exposes some user-facing types only from its Rust extension modules (for example
`SupervisionError` from `monarch._rust_bindings.monarch_hyperactor.supervision`). Code written
for it keeps working here: these modules re-export monarch's own pure-Python types.

The package holds only these modules and `has_tensor_engine` (no stdlib module among its names),
so walking its namespace, as Monarch's tests do, meets only its own objects.
"""

__all__ = ["has_tensor_engine"]


def has_tensor_engine() -> bool:
    """Whether the tensor engine (`monarch._src.tensor`, `monarch.Tensor`) can run here: it is
    always part of this package and needs only torch, so this says whether torch is
    installed (nothing is imported)."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None
