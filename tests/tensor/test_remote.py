"""Remote functions: every propagate form, the actor adverbs, call_on_shard_and_fetch,
OpaqueRef."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import monarch
from monarch.mesh_controller import RemoteException


def _double_plus(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * 2 + k


def test_remote_propagate_callable_and_dotted_path(mesh2: Any) -> None:
    f = monarch.remote("tests.tensor.remote_fns.add_rank_bias", propagate=lambda x, b: x)
    with mesh2.activate():
        x = torch.ones(3)
        y = f(x, 2.5)
        assert isinstance(y, monarch.Tensor) and y.shape == (3,)
        got = monarch.inspect(y)
    assert got.tolist() == [3.5] * 3


@pytest.mark.parametrize("propagate", [None, "mocked", "inspect", "cached"])
def test_remote_propagate_modes(mesh2: Any, propagate: Any) -> None:
    f = monarch.remote(_double_plus, propagate=propagate)
    two = monarch.remote("tests.tensor.remote_fns.split_two", propagate=propagate)
    with mesh2.activate():
        x = torch.ones(2, 2)
        y = f(x, 1.0)
        a, s = two(x)
        a2, _ = two(x)  # a second call ("cached": from the cache)
        assert y.shape == (2, 2) and a.shape == (2, 2) and s.shape == ()
        got = monarch.inspect((y, a, s, a2))
    assert got[0].tolist() == [[3.0, 3.0]] * 2
    assert got[1].tolist() == [[2.0, 2.0]] * 2 and float(got[2]) == 4.0


def test_remote_decorator_and_bad_propagate() -> None:
    @monarch.remote(propagate=lambda x: x)
    def ident(x: torch.Tensor) -> torch.Tensor:
        return x

    assert "ident" in repr(ident)
    with pytest.raises(ValueError, match="propagate"):
        monarch.remote(_double_plus, propagate="guess")
    with pytest.raises(ValueError, match="needs an active mesh"):
        ident(1)


def test_remote_actor_adverbs(mesh2: Any) -> None:
    env = monarch.remote("tests.tensor.remote_fns.env_vars")
    with pytest.raises(ValueError, match="requires an active proc_mesh"):
        env.call()
    with mesh2.activate():
        vm = env.call().get(timeout=30)
        assert vm.extent.labels == ["gpus"]
        streamed = sorted(f.get(timeout=30)["RANK"] for f in env.stream())
        chosen = env.choose().get(timeout=30)["RANK"]
        env.broadcast()
        with pytest.raises(ValueError, match="exactly 1"):
            env.call_one()
    with mesh2.slice(gpus=1).activate():
        one = env.call_one().get(timeout=30)
    assert [v["RANK"] for _, v in vm.items()] == ["0", "1"]
    assert streamed == ["0", "1"] and chosen in ("0", "1") and one["RANK"] == "1"


def test_call_on_shard_and_fetch_with_tensors(mesh2: Any) -> None:
    with mesh2.activate():
        r = mesh2.rank_tensor("gpus")
        fut = monarch.call_on_shard_and_fetch(
            monarch.remote(lambda t: int(t) * 100), r, shard={"gpus": 1}
        )
        assert fut.get(timeout=30) == 100


def test_opaque_ref_is_worker_local(mesh2: Any) -> None:
    append = monarch.remote("tests.tensor.remote_fns.append_to")
    with mesh2.activate():
        box = monarch.OpaqueRef([])
        lengths = [append.call(box, i).get(timeout=30) for i in range(3)]
        held = monarch.fetch_shard(box, gpus=1).get(timeout=30)
    assert [[v for _, v in vm.items()] for vm in lengths] == [[1, 1], [2, 2], [3, 3]]
    assert held == [0, 1, 2]


def test_builtins_log_remote(mesh2: Any) -> None:
    with mesh2.activate():
        monarch.builtins.log_remote("hello from %s", "workers")
        monarch.builtins.set_logging_level_remote(30)
        assert monarch.inspect(torch.ones(1)).tolist() == [1.0]


def test_builtins_random_seeds_and_states_act_on_the_workers_only(mesh2: Any) -> None:
    from monarch.builtins import random as rr

    controller_state = torch.get_rng_state()
    with mesh2.activate():
        rr.set_manual_seed_remote(7)
        a = torch.rand(4)
        state = rr.get_rng_state_remote()
        b = torch.rand(4)
        rr.set_rng_state_remote(state)
        b_again = torch.rand(4)
        rr.set_manual_seed_remote(7, process_idx=1)  # another stream: 7 ^ 1
        c = torch.rand(4)
        rr.seed_remote()
        rr.manual_seed_cuda_remote(3)  # no CUDA here: torch applies it if CUDA starts
        cuda_states = rr.get_rng_state_all_cuda_remote()
        got = monarch.inspect((a, b, b_again, c, state))
    assert torch.equal(torch.get_rng_state(), controller_state)  # never seeded here
    assert torch.equal(got[1], got[2]) and not torch.equal(got[0], got[1])
    assert torch.equal(got[0], torch.manual_seed(7) and torch.rand(4))  # the seed, verbatim
    assert torch.equal(got[3], torch.manual_seed(6) and torch.rand(4))
    assert got[4].dtype == torch.uint8 and got[4].shape == controller_state.shape
    assert cuda_states == []
    torch.set_rng_state(controller_state)


def test_tensor_captured_in_closure_is_refused(mesh2: Any) -> None:
    with mesh2.activate():
        t = torch.ones(2)
        with pytest.raises(TypeError, match="pass it as an argument"):
            monarch.remote(lambda x: x + t, propagate=lambda x: x)
        assert monarch.inspect(t + 1).tolist() == [2.0, 2.0]


def test_process_group_passed_to_remote_function(mesh4: Any) -> None:
    gsum = monarch.remote("tests.tensor.remote_fns.group_sum", propagate=lambda x, g: x)
    with mesh4.activate():
        dm = monarch.get_active_mesh()
        pg = dm.process_group("gpus")
        assert "gpus" in repr(pg)
        x = mesh4.rank_tensor(("hosts", "gpus")).to(torch.float32)
        y = gsum(x, pg)
        got = [monarch.inspect(y, hosts=h, gpus=0) for h in range(2)]
    assert [float(v) for v in got] == [1.0, 5.0]


def test_set_device_beyond_visible_gpus_is_explained(mesh2: Any) -> None:
    setdev = monarch.remote("tests.tensor.remote_fns.set_device")
    with mesh2.activate(), pytest.raises(RemoteException, match="available to monarch worker"):
        monarch.call_on_shard_and_fetch(setdev, 3, shard={"gpus": 1}).get(timeout=30)


def test_remote_adverb_failure_is_remote_exception(mesh2: Any) -> None:
    def boom() -> None:
        raise KeyError("adverb failure")

    with mesh2.activate():
        fut = monarch.remote(boom).choose()
        with pytest.raises(RemoteException, match="adverb failure") as info:
            fut.get(timeout=30)
    assert "test_remote.py" in str(info.value)


def test_module_level_decorated_remote(mesh2: Any) -> None:
    """`@remote` on a function of an importable module: the workers run the function, not the
    `Remote` wrapper they find at its path (rref, the adverbs, errors, string paths)."""
    from tests.tensor import remote_fns

    with mesh2.activate():
        x = torch.arange(3.0)
        y = remote_fns.plus_one(x)
        z = remote_fns.times_three(y)
        assert monarch.fetch_shard(y).result(timeout=30).tolist() == [1.0, 2.0, 3.0]
        assert monarch.fetch_shard(z, gpus=1).result(timeout=30).tolist() == [3.0, 6.0, 9.0]
        vm = remote_fns.rank_env.call().get(timeout=30)
        assert type(vm).__name__ == "ValueMesh"
        assert [v for _, v in vm.items()] == ["0", "1"]
        bad = remote_fns.explode(x)
        with pytest.raises(RemoteException, match="exploded on purpose"):
            monarch.fetch_shard(bad).result(timeout=30)
        with pytest.raises(RemoteException, match="exploded on purpose"):
            remote_fns.explode.call(x).get(timeout=30)
        # the stream goes on after the failure
        assert monarch.inspect(x + 1).tolist() == [1.0, 2.0, 3.0]
        # a string path naming the decorated function runs the function too
        via_path = monarch.remote("tests.tensor.remote_fns.plus_one", propagate=lambda x: x)
        assert monarch.inspect(via_path(x), gpus=1).tolist() == [1.0, 2.0, 3.0]


def test_send_remote_function_gives_port_each_procs_plain_result(mesh2: Any) -> None:
    # getting_started.py's `send(check_memory, args=(), kwargs={}, port=port)`.
    from monarch.actor import Channel, send

    add = monarch.remote("tests.tensor.remote_fns.add_rank_bias")
    port, recv = Channel.open()
    with mesh2.activate():
        x = mesh2.rank_tensor("gpus").to(torch.float32) + torch.zeros(2)
        send(add, args=(x, 0.5), kwargs={}, port=port)
    got = sorted(recv.recv().get(timeout=30).tolist() for _ in range(2))
    assert got == [[0.5, 0.5], [1.5, 1.5]]
