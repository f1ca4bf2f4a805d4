"""The collective and send cost estimates of torchmonarch's
`monarch.simulator.communication_model` (which re-exports this module), in whole microseconds,
over this simulator's latency-bandwidth model (`CommModel`, `monarch._src.simulator.network`,
whose docstring gives the formulas).

`NetworkConfig` holds the link parameters under torchmonarch's names and units (GB/s, µs);
`estimate_collective_time_us(kind, shape, dtype, devices)` prices a collective of a tensor of
`shape` over `devices` ranks laid out host-major (`gpus_per_node` to a host), and
`estimate_send_time_us(shape, dtype)` a send between two hosts. An empty shape (no tensor
known) or a single device costs 0; anything else at least 1 µs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from monarch._src.simulator.network import CommModel

__all__ = [
    "DTYPE_BYTES",
    "NetworkConfig",
    "estimate_collective_time_us",
    "estimate_send_time_us",
    "tensor_size_bytes",
]

# Bytes per element by dtype name (torch's names without "torch."); others count as 4.
DTYPE_BYTES: dict[str, int] = {
    "float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2,
    "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "complex128": 16, "complex64": 8,
    "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1,
    "uint8": 1, "bool": 1,
}
_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Link parameters (defaults: H100 NVLink within a host, 400 Gb/s between hosts)."""

    intra_node_bandwidth_gbs: float = 900.0
    inter_node_bandwidth_gbs: float = 50.0
    single_hop_latency_us: float = 2.0
    gpus_per_node: int = 8
    contention_factor: float = 0.5  # (0, 1]: the share of bandwidth an all-to-all gets

    def comm_model(self) -> CommModel:
        """The same parameters as this simulator's `CommModel` (checked there)."""
        return CommModel(
            intra_node_bandwidth=self.intra_node_bandwidth_gbs * 1e9,
            inter_node_bandwidth=self.inter_node_bandwidth_gbs * 1e9,
            hop_latency=self.single_hop_latency_us * 1e-6,
            gpus_per_node=self.gpus_per_node,
            contention=self.contention_factor,
        )


def tensor_size_bytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes of a tensor of `shape` (an empty shape is one element) and dtype name `dtype`."""
    return math.prod(shape) * DTYPE_BYTES.get(str(dtype).removeprefix("torch."), 4)


def _micros(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1e6))


def estimate_collective_time_us(reduce_type: str, tensor_shape: Sequence[int], dtype_str: str,
                                num_devices: int, config: NetworkConfig | None = None) -> int:
    """Microseconds of collective `reduce_type` (all_reduce, all_gather, reduce_scatter or
    all_to_all; another name is priced as an all_reduce, as on torchmonarch) of a tensor of
    `tensor_shape` over `num_devices` ranks."""
    size = tensor_size_bytes(tensor_shape, dtype_str) if tensor_shape else 0
    if num_devices <= 1 or size == 0:
        return 0
    kind = reduce_type if reduce_type in _COLLECTIVES else "all_reduce"
    model = (config or NetworkConfig()).comm_model()
    return _micros(model.collective_time(kind, size, tuple(range(num_devices))))


def estimate_send_time_us(tensor_shape: Sequence[int], dtype_str: str,
                          config: NetworkConfig | None = None) -> int:
    """Microseconds to send a tensor of `tensor_shape` from one host to another."""
    size = tensor_size_bytes(tensor_shape, dtype_str) if tensor_shape else 0
    if size == 0:
        return 0
    model = (config or NetworkConfig()).comm_model()
    return _micros(model.p2p_time(size, 0, model.gpus_per_node))  # ranks on two hosts
