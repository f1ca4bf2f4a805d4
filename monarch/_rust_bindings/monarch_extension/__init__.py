"""Re-exports under torchmonarch's `monarch_extension` paths (see `monarch._rust_bindings`)."""
