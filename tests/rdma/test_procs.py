"""RDMA buffers between actors in different procs: the owner registers, a peer moves the bytes.

Uses the shared `procs2` mesh (nothing here damages it): the owner lives on rank 0, the peer on
rank 1, and each test forces the peer's data plane so every plane runs between real processes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from monarch.rdma import RDMABuffer
from tests.rdma.actors import AsyncPeer, Owner, Peer, expected

pytestmark = pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning")

T = 30.0
N = 3000
PLANES = ["process_vm", "shm", "tcp"]


@pytest.fixture(scope="module")
def pair(procs2: Any) -> Iterator[tuple[Any, Any]]:
    owner = procs2.slice(gpus=0).spawn("rdma_owner", Owner, N)
    peer = procs2.slice(gpus=1).spawn("rdma_peer", Peer)
    yield owner, peer
    owner.stop().get(timeout=T)
    peer.stop().get(timeout=T)


@pytest.fixture(params=PLANES)
def plane(request: pytest.FixtureRequest, pair: tuple[Any, Any]) -> Iterator[str]:
    pair[1].force.call_one(request.param).get(timeout=T)
    yield request.param
    pair[1].force.call_one(None).get(timeout=T)


def test_peer_reads_owner_buffer_one_sided(pair: tuple[Any, Any], plane: str) -> None:
    owner, peer = pair
    buf = owner.make.call_one().get(timeout=T)
    assert buf.size() == N and "Owner rdma_owner" in buf.owner
    values, backend = peer.read.call_one(buf, 5).get(timeout=T)
    assert backend == plane
    assert values == expected(N) + [0] * 5


def test_peer_writes_owner_memory(pair: tuple[Any, Any], plane: str) -> None:
    owner, peer = pair
    buf = owner.make.call_one().get(timeout=T)
    try:
        peer.write.call_one(buf, [9, 9, 9]).get(timeout=T)
        assert owner.head.call_one(4).get(timeout=T) == [9, 9, 9, 3]
        owner.fill.call_one(0).get(timeout=T)
        assert peer.read.call_one(buf).get(timeout=T)[0] == [0] * N
    finally:
        owner.reset.call_one().get(timeout=T)


def test_async_endpoint_awaits_transfer(procs2: Any, pair: tuple[Any, Any]) -> None:
    owner, _ = pair
    buf = owner.make.call_one().get(timeout=T)
    reader = procs2.slice(gpus=1).spawn("rdma_async_peer", AsyncPeer)
    try:
        assert reader.read.call_one(buf).get(timeout=T) == expected(N)
    finally:
        reader.stop().get(timeout=T)


def test_owner_drop_fails_peer_transfers(pair: tuple[Any, Any], plane: str) -> None:
    owner, peer = pair
    buf = owner.make_bytearray.call_one(64).get(timeout=T)
    assert peer.try_read.call_one(buf).get(timeout=T) == "ok"
    owner.drop_all.call_one().get(timeout=T)
    outcome = peer.try_read.call_one(buf).get(timeout=T)
    assert outcome.startswith("RDMABufferDroppedError") and "was dropped" in outcome


def test_peer_drop_unregisters_at_owner(pair: tuple[Any, Any]) -> None:
    owner, peer = pair
    buf = owner.make_bytearray.call_one(16).get(timeout=T)
    peer.drop.call_one(buf).get(timeout=T)
    with pytest.raises(RuntimeError, match="was dropped"):
        buf.read_into(memoryview(bytearray(16))).get(timeout=T)


def test_client_reads_actor_buffer(pair: tuple[Any, Any]) -> None:
    owner, _ = pair
    buf = owner.make_bytearray.call_one(100).get(timeout=T)
    dst = bytearray(100)
    buf.read_into(memoryview(dst)).get(timeout=T)
    assert dst == b"\x07" * 100


def test_action_gathers_from_owner_and_client(pair: tuple[Any, Any]) -> None:
    owner, peer = pair
    theirs = owner.make_bytearray.call_one(8).get(timeout=T)
    ours = RDMABuffer(torch.arange(5, dtype=torch.uint8))
    assert peer.gather.call_one([theirs, ours]).get(timeout=T) == [[7] * 8, [0, 1, 2, 3, 4]]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_bytearray_buffers_between_procs_without_torch() -> None:
    # A fresh controller whose procs never import torch; the peer reads over the TCP plane.
    code = textwrap.dedent(
        """
        import os, sys
        os.environ["MONARCH_RDMA_FORCE_PLANE"] = "tcp"
        from monarch.actor import Actor, endpoint, this_host
        from monarch.rdma import RDMABuffer

        class Owner(Actor):
            def __init__(self):
                self.mem = bytearray(b"monarch!" * 1000)
            @endpoint
            def make(self):
                return RDMABuffer(memoryview(self.mem))
            @endpoint
            def torch_loaded(self):
                return "torch" in sys.modules

        class Reader(Actor):
            @endpoint
            def read(self, buf):
                out = bytearray(buf.size())
                buf.read_into(memoryview(out)).get(timeout=30)
                return bytes(out[:16]), buf._plane, "torch" in sys.modules

        procs = this_host().spawn_procs(per_host={"procs": 2})
        owner = procs.slice(procs=0).spawn("owner", Owner)
        reader = procs.slice(procs=1).spawn("reader", Reader)
        buf = owner.make.call_one().get(timeout=30)
        print(reader.read.call_one(buf).get(timeout=30), owner.torch_loaded.call_one().get(),
              "torch" in sys.modules)
        procs.stop().get(timeout=30)
        """
    )
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, timeout=100, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "(b'monarch!monarch!', 'tcp', False) False False", res.stdout
