"""SPMD: torchrun-style scripts run unchanged on a proc mesh (`monarch.spmd`)."""
