"""torchmonarch's private path of `monarch.gather_mount` (a re-export; the code is in
`monarch._src.mount.gather`)."""
