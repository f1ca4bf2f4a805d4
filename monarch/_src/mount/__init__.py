"""FUSE mounts between a job's controller and its hosts.

`remote.py` mounts a controller directory read-only on every host (torchmonarch's
`remotemount`, `job.remote_mount`); `gather.py` mounts every host's directory under one local
directory (`gather_mount`, `job.gather_mount`); `chunked.py` is the in-memory block mount behind
torchmonarch's `chunked_fuse` binding. `fs.py` is the FUSE file system they share (libfuse3
through mfusepy), `layout.py` the index of a mounted tree, `wire.py` the byte service,
`cache.py` the hosts' chunk cache, `reaper.py` the watchdog that detaches a mount whose server
died. Public names: `monarch.remotemount`, `monarch.gather_mount`.
"""
