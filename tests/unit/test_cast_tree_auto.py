"""`cast_tree="auto"`: the relay tree for a proc mesh on two or more hosts, not all this machine,
with at least `relay.TREE_MIN_RANKS` procs in all (where it starts to save the caller's CPU,
measured by `benchmarks/cast_tree.py --sweep`); `always` and `off` regardless of size."""

from __future__ import annotations

import pytest

from monarch._src.mesh import relay
from monarch._src.mesh.proc_mesh import ProcTable
from monarch._src.runtime.mailbox import pending_key
from monarch.config import configured

pytestmark = pytest.mark.timeout(30)


def _table(hosts: int, per_host: int) -> ProcTable:
    n = hosts * per_host
    return ProcTable([pending_key(f"p{i}") for i in range(n)],
                     hosts=[h for h in range(hosts) for _ in range(per_host)])


def test_auto_takes_the_tree_from_the_measured_size_on_two_hosts_or_more() -> None:
    least = relay.TREE_MIN_RANKS
    with configured(cast_tree="auto"):
        assert relay.hosts_of(_table(1, least)) is None  # one host: never
        assert relay.hosts_of(ProcTable([pending_key("a")] * least)) is None  # hosts unknown
        assert relay.hosts_of(_table(2, (least - 1) // 2)) is None  # too few procs
        big = relay.hosts_of(_table(2, (least + 1) // 2))
        assert big is not None and big.count == 2


def test_always_and_off_do_not_look_at_the_size() -> None:
    with configured(cast_tree="always"):
        assert relay.hosts_of(_table(2, 1)) is not None
        assert relay.hosts_of(_table(1, 2)) is not None
    with configured(cast_tree="off"):
        assert relay.hosts_of(_table(4, relay.TREE_MIN_RANKS)) is None


def test_auto_keeps_the_flat_cast_when_every_host_is_this_machine() -> None:
    table = _table(4, relay.TREE_MIN_RANKS)
    table.one_machine = True  # what the host agent sets for loopback or unix-socket hosts
    with configured(cast_tree="auto"):
        assert relay.hosts_of(table) is None
    with configured(cast_tree="always"):
        assert relay.hosts_of(table) is not None
