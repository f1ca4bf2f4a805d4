"""Import paths of torchmonarch's compiled bindings that user code imports directly.

torchmonarch exposes some user-facing types only from its Rust extension modules (for example
`SupervisionError` from `monarch._rust_bindings.monarch_hyperactor.supervision`). Code written
for it keeps working here: these modules re-export monarch's own pure-Python types.
"""
