"""The ibverbs data plane over a real device, in loopback (the client reads its own buffer).

Skipped, with the probe's reason, where there is no usable verbs device (no /sys/class/infiniband,
no pyverbs, or pyverbs listing nothing); this repository's CI machines have none.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import torch

from monarch._src.rdma.ibverbs import probe
from monarch.rdma import RDMABuffer

_PROBE = probe()
pytestmark = [
    pytest.mark.skipif(not _PROBE.available, reason=f"no ibverbs: {_PROBE.reason}"),
    pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning"),
]


def test_ibverbs_loopback_read_write_and_drop(force_plane: Any) -> None:
    force_plane("ibverbs")
    mem = (torch.arange(1 << 20) % 251).to(torch.uint8)
    buf = RDMABuffer(mem)
    remote = pickle.loads(pickle.dumps(buf))
    assert remote.backend == "ibverbs"
    dst = torch.zeros(1 << 20, dtype=torch.uint8)
    remote.read_into(dst).get(timeout=30)
    assert torch.equal(dst, mem)
    remote.write_from(torch.full((10,), 3, dtype=torch.uint8)).get(timeout=30)
    assert mem[:10].tolist() == [3] * 10
    buf.drop().get(timeout=30)
    with pytest.raises(RuntimeError, match="was dropped"):
        remote.read_into(dst).get(timeout=30)
