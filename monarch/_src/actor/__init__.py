"""torchmonarch's `monarch._src.actor.*` import paths, as thin re-exports of this package's names.

Code written for Monarch imports a few names from these private modules (`ActorMesh` from
`monarch._src.actor.actor_mesh`, `Shape` from `monarch._src.actor.shape`, ...). Each module here
re-exports the same objects the public facades give, so both import paths name one class. The
classes keep their home modules (`monarch._src.mesh`, `monarch._src.shape`), which is where
pickles refer to them; only their reprs name Monarch's paths.

The mesh modules import the `monarch.actor` facade first, so importing one has the same effects
as importing `monarch.actor` (as on Monarch, where these modules are the implementation).
`shape` and `future` do not: they start nothing.

Their reprs return Monarch's text, address included (`ProcMesh`, `HostMesh` and `RDMABuffer` as
default object reprs under Monarch's module names, `Endpoint` as the binding's `ActorEndpoint`).
Rejected: setting `__module__` to Monarch's paths, which would make pickles, docs and tracebacks
depend on these re-export modules.
"""
