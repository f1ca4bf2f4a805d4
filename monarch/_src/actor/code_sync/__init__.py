"""torchmonarch's `monarch._src.actor.code_sync` path: keeping procs' code current.

`auto_reload` reloads the modules a process imported whose files changed (after a workspace
sync, say). torchmonarch's package also re-exports its Rust code-sync mesh client; workspaces
travel here through `HostMesh.sync_workspace` / `monarch.job.sync_workspace` instead.
"""
