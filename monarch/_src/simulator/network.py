"""The latency-bandwidth model of collectives and point-to-point transfers.

Ring algorithms over `n` participants: all-reduce moves `2(n-1)/n` of the buffer through each
link in `2(n-1)` steps; all-gather, reduce-scatter and all-to-all move `(n-1)/n` of the (full)
buffer in `n-1` steps; a point-to-point send moves the buffer once in one step. A step costs the
per-hop latency. The link is intra-node when every participant is on one host, otherwise
inter-node, derated by the contention factor (the host's GPUs share its network). An all-to-all
is derated by it on any link, as torchmonarch's model does: every member sends to every other
at once, so even a host's own links are shared.
"""

from __future__ import annotations

import dataclasses

__all__ = ["CommModel"]


@dataclasses.dataclass(frozen=True)
class CommModel:
    """Link parameters; the defaults are those of the contract (§1.8)."""

    intra_node_bandwidth: float = 900e9  # bytes/s
    inter_node_bandwidth: float = 50e9  # bytes/s
    hop_latency: float = 2e-6  # seconds per algorithm step
    gpus_per_node: int = 8
    contention: float = 0.5  # fraction of inter-node bandwidth available under contention

    def __post_init__(self) -> None:
        for name in ("intra_node_bandwidth", "inter_node_bandwidth", "gpus_per_node"):
            if getattr(self, name) <= 0:
                raise ValueError(f"CommModel.{name} must be positive, got {getattr(self, name)}.")
        if self.hop_latency < 0:
            raise ValueError(f"CommModel.hop_latency must be >= 0, got {self.hop_latency}.")
        if not 0 < self.contention <= 1:
            raise ValueError(f"CommModel.contention must be in (0, 1], got {self.contention}.")

    def node_of(self, rank: int) -> int:
        """The host of engine rank `rank` (ranks are laid out host-major)."""
        return rank // self.gpus_per_node

    def bandwidth(self, members: tuple[int, ...]) -> float:
        """Bytes/s of the slowest link a ring over `members` uses."""
        if len({self.node_of(r) for r in members}) <= 1:
            return self.intra_node_bandwidth
        return self.inter_node_bandwidth * self.contention

    def collective_time(self, kind: str, nbytes: float, members: tuple[int, ...]) -> float:
        """Seconds of collective `kind` over `members`; `nbytes` is the per-rank input for
        all_reduce/reduce_scatter/all_to_all and the per-rank output for all_gather."""
        n = len(members)
        if n <= 1:
            return 0.0
        bw = self.bandwidth(members)
        if kind == "all_reduce":
            return 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * self.hop_latency
        if kind == "all_to_all" and bw == self.intra_node_bandwidth:
            bw *= self.contention  # (inter-node links are derated already)
        if kind in ("all_gather", "reduce_scatter", "all_to_all"):
            return (n - 1) / n * nbytes / bw + (n - 1) * self.hop_latency
        raise ValueError(
            f"Unknown collective {kind!r}; use all_reduce, all_gather, reduce_scatter or "
            "all_to_all."
        )

    def p2p_time(self, nbytes: float, src: int, dst: int) -> float:
        """Seconds to send `nbytes` from engine rank `src` to `dst`."""
        if src == dst:
            return 0.0
        return nbytes / self.bandwidth((src, dst)) + self.hop_latency
