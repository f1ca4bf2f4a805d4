"""torchmonarch's `monarch.simulator.communication_model`: collective and send cost estimates
in microseconds under a `NetworkConfig`. See `monarch._src.simulator.communication`."""

from monarch._src.simulator.communication import (
    DTYPE_BYTES,
    NetworkConfig,
    estimate_collective_time_us,
    estimate_send_time_us,
    tensor_size_bytes,
)

__all__ = [
    "DTYPE_BYTES",
    "NetworkConfig",
    "estimate_collective_time_us",
    "estimate_send_time_us",
    "tensor_size_bytes",
]
