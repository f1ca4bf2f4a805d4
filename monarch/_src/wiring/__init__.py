"""Wiring: one module per process kind fills the hook slots of `monarch._src.mesh.hooks`.

`controller` is imported by the facades a controller loads (`monarch.actor`); `proc` runs in
every proc monarch starts. These are the only modules that import features in order to install
them; nothing below them imports a feature it does not itself belong to.
"""
