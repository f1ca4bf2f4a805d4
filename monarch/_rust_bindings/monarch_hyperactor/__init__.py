"""Re-exports under torchmonarch's `monarch_hyperactor` module paths (see `monarch._rust_bindings`)."""
