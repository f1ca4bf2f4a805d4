"""torchmonarch's `monarch._rust_bindings.monarch_extension.chunked_fuse`: the in-memory block
FUSE mount (`mount_chunked_fuse`, `FuseMountHandle`), here written in Python over libfuse3
(`monarch._src.mount.chunked`)."""

from monarch._src.mount.chunked import FuseMountHandle, mount_chunked_fuse

__all__ = ["FuseMountHandle", "mount_chunked_fuse"]
