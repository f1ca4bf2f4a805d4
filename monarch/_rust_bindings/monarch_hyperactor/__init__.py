"""Re-exports under torchmonarch's `monarch_hyperactor` paths (see `monarch._rust_bindings`)."""
