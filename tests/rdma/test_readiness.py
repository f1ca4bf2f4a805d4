"""Starting the RDMA managers of a proc mesh (`readiness`, and the per-mesh cache and binding
of `monarch._src.rdma.rdma` / `monarch._rust_bindings.rdma`): settings checks, every proc's
manager started through `rdma_init`, a proc's bad setting surfacing as `RdmaInitError`."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from monarch._rust_bindings.monarch_hyperactor.pytokio import Shared
from monarch._rust_bindings.rdma import RdmaInitError, _RdmaManager
from monarch._src.rdma import rdma as api, readiness
from monarch.actor import Actor, context, endpoint, this_host, this_proc
from monarch.config import configured

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.filterwarnings("ignore::monarch.rdma.RDMATcpFallbackWarning")]

T = 60.0
TCP = {"rdma_disable_ibverbs": True, "rdma_allow_tcp_fallback": True, "rdma_ibverbs_target": ""}


class ManagerProbe(Actor):
    @endpoint
    def manager_started(self) -> bool:
        from monarch._src.rdma.manager import manager_if_started

        return manager_if_started() is not None

    @endpoint
    def make_buffer(self) -> str:
        from monarch.rdma import RDMABuffer

        try:
            RDMABuffer(memoryview(bytearray(8)))
        except RdmaInitError as exc:
            return f"RdmaInitError: {exc}"
        return "made"


def test_a_bare_ibverbs_target_is_refused_when_a_manager_starts() -> None:
    with configured(rdma_ibverbs_target="mlx5_0"), \
            pytest.raises(RdmaInitError, match='RDMA_IBVERBS_TARGET.*"mlx5_0".*nic:<name>'):
        readiness.check_settings()


def test_no_backend_is_refused_when_a_manager_starts() -> None:
    with configured(rdma_disable_ibverbs=True, rdma_allow_tcp_fallback=False,
                    rdma_ibverbs_target=""), \
            pytest.raises(RdmaInitError, match="no RDMA backend available.*rdma_allow_tcp"):
        readiness.check_settings()


def test_init_error_pickles_as_itself() -> None:
    err = pickle.loads(pickle.dumps(RdmaInitError("bad target")))
    assert type(err) is RdmaInitError and str(err) == "bad target"


def test_the_binding_refuses_what_is_not_a_proc_mesh() -> None:
    handle = _RdmaManager.ensure_init_rdma_manager_nonblocking(
        Shared.from_value(42), context().actor_instance)
    with pytest.raises(TypeError, match="ProcMesh.*int"):
        handle.get(timeout=T)


def test_the_clients_mesh_starts_once_and_its_handle_is_reused() -> None:
    with configured(**TCP):
        first = api._ensure_init_rdma_manager()
        assert api._ensure_init_rdma_manager() is first
        assert first.get(timeout=T) is None and first.get(timeout=T) is None
        assert api._ensure_init_rdma_manager_on_mesh(this_proc()) is first


@pytest.fixture
def tcp_procs() -> Iterator[Any]:
    with configured(**TCP):
        procs = this_host().spawn_procs(per_host={"gpus": 2})
        try:
            yield procs
        finally:
            procs.stop().get(timeout=T)


def test_a_mesh_init_starts_the_manager_of_every_proc(tcp_procs: Any) -> None:
    probe = tcp_procs.spawn("manager_probe", ManagerProbe)
    assert list(probe.manager_started.call().get(timeout=T).values()) == [False, False]
    handle = _RdmaManager.ensure_init_rdma_manager_nonblocking(
        Shared.from_value(tcp_procs), context().actor_instance)
    assert handle.get(timeout=T) is None
    assert list(probe.manager_started.call().get(timeout=T).values()) == [True, True]
    assert len(readiness._started) >= 2  # remembered: a second init sends nothing
    assert readiness.init_mesh(tcp_procs).result(timeout=T) is None


def test_a_procs_bad_setting_fails_the_init_and_its_buffers() -> None:
    with configured(rdma_allow_tcp_fallback=True, rdma_ibverbs_target="mlx5_0"):
        procs = this_host().spawn_procs(per_host={"gpus": 1})
    try:
        with pytest.raises(RdmaInitError, match="RDMA_IBVERBS_TARGET"):
            readiness.init_mesh(procs).result(timeout=T)
        probe = procs.spawn("bad_target_probe", ManagerProbe)
        answer = probe.make_buffer.call_one().get(timeout=T)
        assert answer.startswith("RdmaInitError") and "RDMA_IBVERBS_TARGET" in answer
    finally:
        procs.stop().get(timeout=T)
