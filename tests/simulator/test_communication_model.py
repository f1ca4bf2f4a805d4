"""monarch.simulator.communication_model: torchmonarch's cost estimates over CommModel."""

from __future__ import annotations

import math

import pytest

from monarch.simulator import CommModel
from monarch.simulator.communication_model import (
    NetworkConfig,
    estimate_collective_time_us,
    estimate_send_time_us,
    tensor_size_bytes,
)

pytestmark = pytest.mark.timeout(30)


def test_sizes_by_dtype_name() -> None:
    assert tensor_size_bytes([2, 3], "bfloat16") == 12
    assert tensor_size_bytes([2, 3], "torch.float64") == 48
    assert tensor_size_bytes([], "int8") == 1  # one element
    assert tensor_size_bytes([5], "my_dtype") == 20  # unknown: 4 bytes


def test_collectives_are_priced_by_commmodel_in_whole_microseconds() -> None:
    size = 1024 * 1024 * 4
    for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        seconds = CommModel().collective_time(kind, size, tuple(range(4)))
        got = estimate_collective_time_us(kind, [1024, 1024], "float32", 4)
        assert got == math.ceil(seconds * 1e6)
    # an unknown collective is priced as an all-reduce; no tensor or one device costs nothing
    assert (estimate_collective_time_us("broadcast", [1024, 1024], "float32", 4)
            == estimate_collective_time_us("all_reduce", [1024, 1024], "float32", 4))
    assert estimate_collective_time_us("all_reduce", [], "float32", 4) == 0
    assert estimate_collective_time_us("all_reduce", [8], "float32", 1) == 0
    tiny = CommModel(hop_latency=0).collective_time("all_reduce", 1, (0, 1))
    assert 0 < tiny * 1e6 < 1  # ...
    assert estimate_collective_time_us(  # ... and yet at least 1 µs
        "all_reduce", [1], "int8", 2, NetworkConfig(single_hop_latency_us=0)) == 1


def test_network_config_changes_the_estimates() -> None:
    shape = [1024, 1024]
    # 16 ranks span two hosts of 8: the inter-node link
    assert (estimate_collective_time_us("all_reduce", shape, "float32", 16)
            > estimate_collective_time_us("all_reduce", shape, "float32", 8))
    slow = NetworkConfig(intra_node_bandwidth_gbs=100.0)
    assert (estimate_collective_time_us("all_reduce", shape, "float32", 4, slow)
            > estimate_collective_time_us("all_reduce", shape, "float32", 4))
    # all-to-all shares every link, within a host too
    crowded = NetworkConfig(contention_factor=0.25)
    assert (estimate_collective_time_us("all_to_all", shape, "float32", 4, crowded)
            > estimate_collective_time_us("all_to_all", shape, "float32", 4))
    assert (estimate_collective_time_us("all_gather", shape, "float32", 4, crowded)
            == estimate_collective_time_us("all_gather", shape, "float32", 4))
    with pytest.raises(ValueError, match="contention must be in"):
        estimate_collective_time_us("all_reduce", shape, "float32", 4,
                                    NetworkConfig(contention_factor=0))


def test_a_send_crosses_hosts() -> None:
    size = 512 * 512 * 4
    assert estimate_send_time_us([512, 512], "float32") == math.ceil(
        (size / (50e9 * 0.5) + 2e-6) * 1e6)
    assert estimate_send_time_us([], "float32") == 0
    assert estimate_send_time_us([1024, 1024], "float32") > estimate_send_time_us([64], "float32")
