"""Activation and dispatch: proxies with fake metadata, pipelining, local torch outside."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import torch

import monarch
from monarch.actor import Actor, endpoint


class GateOpener(Actor):
    """Opens the worker gate of `tests.tensor.remote_fns` on its proc."""

    @endpoint
    def open(self) -> None:
        from tests.tensor import remote_fns

        remote_fns.open_gate()


def test_import_monarch_lazy_no_torch() -> None:
    code = (
        "import sys, monarch; assert 'torch' not in sys.modules; "
        "assert 'Simulator' in monarch.__all__; monarch.remote; "
        "assert 'torch' in sys.modules; print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_activate_ops_return_distributed_tensors_with_shapes(mesh2: Any) -> None:
    with mesh2.activate():
        a = torch.ones(3, 4)
        b = (a @ torch.ones(4, 5)).sum(dim=0)
        assert isinstance(b, monarch.Tensor)
        assert b.shape == (5,) and b.dtype == torch.float32
        assert monarch.get_active_mesh().sizes == {"gpus": 2}
        v0, v1 = monarch.inspect(b), monarch.inspect(b, gpus=1)
    assert torch.equal(v0, torch.full((5,), 12.0)) and torch.equal(v1, v0)


def test_outside_activate_torch_runs_locally(mesh2: Any) -> None:
    x = torch.ones(2)
    assert type(x) is torch.Tensor
    with pytest.raises(ValueError, match="no device mesh is active"):
        monarch.get_active_mesh()
    with mesh2.activate():
        with monarch.no_mesh.activate():
            y = torch.ones(2) * 3
            assert type(y) is torch.Tensor
        d = torch.zeros(2)
        with monarch.no_mesh.activate():
            # as on torchmonarch: distributed tensors still compute on their own mesh
            e = d + 1
            assert isinstance(e, monarch.Tensor)
            assert monarch.inspect(e, gpus=1).tolist() == [1.0, 1.0]


def test_rand_differs_per_proc_and_fetch_shard_by_coordinates(mesh2: Any) -> None:
    with mesh2.activate():
        r = torch.rand(16)
        f0 = monarch.fetch_shard(r, {"gpus": 0})
        f1 = monarch.fetch_shard({"v": r, "k": 3}, gpus=1)
        v0, v1 = f0.get(timeout=30), f1.get(timeout=30)
    assert v1["k"] == 3
    assert not torch.equal(v0, v1["v"])
    with mesh2.activate(), pytest.raises(ValueError, match="Unknown dimension"):
        monarch.fetch_shard(r, gpus=0, hosts=0)
    # as on torchmonarch: a shard map that names some dimensions must name them all
    with mesh2.activate(), pytest.raises(
        ValueError, match=r"Missing key 'gpus' in shard map. Need all of \('gpus',\)"
    ):
        monarch.fetch_shard(r, hosts=0)


def test_ops_are_pipelined_without_waiting_for_workers(mesh2: Any) -> None:
    gate = monarch.remote("tests.tensor.remote_fns.wait_gate", propagate=lambda x: x)
    opener = mesh2.spawn("gate_opener", GateOpener)
    with mesh2.activate():
        x = torch.zeros(4)
        blocked = gate(x)  # both workers now wait for the gate
        y = blocked
        for _ in range(200):  # issued while the workers are blocked: nothing waits
            y = y + 1
        assert y.shape == (4,)
        fut = monarch.fetch_shard(y)
        assert not fut.done()
        opener.open.call().get(timeout=30)
        value = fut.get(timeout=30)
    assert torch.equal(value, torch.full((4,), 201.0))


def test_in_place_and_views_follow_torch_semantics(mesh2: Any) -> None:
    with mesh2.activate():
        x = torch.zeros(2, 3)
        row = x[1]
        row.add_(5)
        x.mul_(2)
        out = torch.empty(2, 3)
        torch.add(x, 1, out=out)
        got = monarch.inspect((x, out))
    assert torch.equal(got[0], torch.tensor([[0.0] * 3, [10.0] * 3]))
    assert torch.equal(got[1], got[0] + 1)


def test_data_dependent_op_raises_clear_error(mesh2: Any) -> None:
    with mesh2.activate():
        x = torch.ones(2)
        # torchmonarch's exception type and text (the op), plus a note saying what to do
        with pytest.raises(torch._subclasses.fake_tensor.DataDependentOutputException,
                           match="_local_scalar_dense") as info:
            x.sum().item()
        assert any("monarch.inspect" in note for note in info.value.__notes__)


def test_autograd_backward_runs_on_mesh(mesh2: Any) -> None:
    with mesh2.activate():
        w = torch.zeros(3, requires_grad=True)
        loss = ((w - torch.tensor([1.0, 2.0, 3.0])) ** 2).sum()
        loss.backward()
        grad = monarch.inspect(w.grad)
    assert torch.equal(grad, torch.tensor([-2.0, -4.0, -6.0]))


def test_local_tensors_in_a_batch_sent_inside_activate_travel_by_value(mesh2: Any) -> None:
    # coalescing() sends its batch on this thread as the block ends, with the mesh's dispatch
    # mode active: pickling the local constant must read its bytes, not issue a remote detach
    # (the cause of a flake: "invalid python storage" when an inspect flushed before the timer).
    const = torch.tensor([1.0, 2.0, 3.0])
    with mesh2.activate():
        with monarch.coalescing():
            x = torch.zeros(3) - const
            y = x - torch.tensor([1.0, 1.0, 1.0])
        got = monarch.inspect((x, y))
    assert torch.equal(got[0], -const) and torch.equal(got[1], -const - 1)


def test_worker_environment_variables(mesh2: Any) -> None:
    env = monarch.remote("tests.tensor.remote_fns.env_vars")
    with mesh2.activate():
        vm = env.call().get(timeout=30)
    values = [v for _, v in vm.items()]
    assert [v["RANK"] for v in values] == ["0", "1"]
    assert [v["LOCAL_RANK"] for v in values] == ["0", "1"]
    assert all(v["WORLD_SIZE"] == "2" and v["LOCAL_WORLD_SIZE"] == "2" for v in values)
    assert [v["CUDA_VISIBLE_DEVICES"] for v in values] == ["0", "1"]


def test_rank_tensor_and_table(mesh4: Any) -> None:
    with mesh4.activate():
        h = mesh4.rank_tensor("hosts")
        flat = mesh4.rank_tensor(("hosts", "gpus"))
        got = [monarch.inspect((h, flat), hosts=i, gpus=j) for i in range(2) for j in range(2)]
    assert [int(a) for a, _ in got] == [0, 0, 1, 1]
    assert [int(b) for _, b in got] == [0, 1, 2, 3]
    table = mesh4.to_table().splitlines()
    assert table[0] == "hosts gpus rank" and table[-1] == "1 1 3"


def test_tensor_on_other_mesh_is_refused(mesh2: Any) -> None:
    with mesh2.slice(gpus=0).activate():
        a = torch.ones(2)
    with mesh2.slice(gpus=1).activate(), pytest.raises(ValueError, match="to_mesh"):
        a + 1


def test_this_proc_mesh_keeps_controller_state() -> None:
    import os

    from monarch.actor import this_proc

    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    rank_before = os.environ.get("RANK")
    with this_proc().activate():
        x = torch.ones(2) * 2
        got = monarch.inspect(x)
    assert torch.rand(1).item() == expected.item()
    assert os.environ.get("RANK") == rank_before
    assert got.tolist() == [2.0, 2.0]


def test_show_needs_torchshow(mesh2: Any) -> None:
    import importlib.util

    if importlib.util.find_spec("torchshow") is not None:
        pytest.skip("torchshow is installed; this checks the message without it")
    with mesh2.activate(), pytest.raises(ImportError, match="torchshow"):
        monarch.show(torch.ones(2))


def test_reading_fetched_values_inside_activate_runs_locally(mesh2: Any) -> None:
    with mesh2.activate():
        v = monarch.inspect(torch.ones(2) * 3)
        s = monarch.inspect((torch.ones(2) * 3).sum())
        assert float(s) == 6.0  # reading a fetched (local) value needs no mesh
        assert torch.equal(v, v)
        assert isinstance(v[0], monarch.Tensor)  # but computing with it goes to the mesh


def test_deletes_go_right_after_the_last_command_issued_before_the_release() -> None:
    from typing import NamedTuple

    from monarch._src.tensor.commands import Delete
    from monarch._src.tensor.engine import _place_deletes

    class Cmd(NamedTuple):
        seq: int

    commands = [Cmd(5), Cmd(6), Cmd(7)]
    # id 1 freed after command 5 was issued, id 2 after 6, id 3 after 7, id 4 before 5.
    placed = _place_deletes(commands, [(3, 7), (1, 5), (4, 4), (2, 6)])
    assert placed == [Delete((4,)), Cmd(5), Delete((1,)), Cmd(6), Delete((2,)), Cmd(7),
                      Delete((3,))]
    assert _place_deletes([], [(9, 3)]) == [Delete((9,))]


def test_a_freed_output_is_reused_by_the_next_collective(mesh2: Any) -> None:
    # The previous result is dropped before the next reduce is issued: its Delete runs first,
    # so the worker's buffer pool hands that very memory to the next reduce's output. (A Delete
    # sent after the reduce would leave the old buffer alive while the new one is allocated.)
    address = monarch.remote("tests.tensor.remote_fns.data_address",
                             propagate=lambda t: torch.tensor(0))
    with mesh2.activate():
        big = torch.ones(1 << 20)
        r = big.reduce("gpus")
        first = int(monarch.inspect(address(r)))
        del r
        r = big.reduce("gpus")
        second = int(monarch.inspect(address(r)))
    assert second == first
