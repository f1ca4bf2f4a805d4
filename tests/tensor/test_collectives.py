"""Collectives over mesh dimensions with gloo: every reduction, scatter, stack, sub-dims."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import monarch


def _per_rank(mesh: Any, dims: Any = "gpus", dtype: torch.dtype = torch.float32) -> Any:
    """A distributed [r+1, r+2, r+3, r+4] where r is the rank along `dims`."""
    r = mesh.rank_tensor(dims).to(dtype)
    return torch.arange(4, dtype=dtype) + 1 + r


@pytest.mark.parametrize(
    ("reduction", "expected"),
    [
        ("sum", [3.0, 5.0, 7.0, 9.0]),
        ("avg", [1.5, 2.5, 3.5, 4.5]),
        ("product", [2.0, 6.0, 12.0, 20.0]),
        ("min", [1.0, 2.0, 3.0, 4.0]),
        ("max", [2.0, 3.0, 4.0, 5.0]),
    ],
)
def test_reduce_float_reductions(mesh2: Any, reduction: str, expected: list[float]) -> None:
    with mesh2.activate():
        x = _per_rank(mesh2)
        y = x.reduce("gpus", reduction)
        got = [monarch.inspect(y, gpus=g) for g in range(2)]
        orig = monarch.inspect(x, gpus=1)
    assert all(torch.equal(v, torch.tensor(expected)) for v in got)
    assert torch.equal(orig, torch.tensor([2.0, 3.0, 4.0, 5.0]))  # out of place


@pytest.mark.parametrize(("reduction", "expected"), [("band", [0, 2, 0, 4]), ("bor", [3, 3, 7, 5]),
                                                     ("bxor", [3, 1, 7, 1])])
def test_reduce_bitwise(mesh2: Any, reduction: str, expected: list[int]) -> None:
    with mesh2.activate():
        y = _per_rank(mesh2, dtype=torch.int64).reduce("gpus", reduction)
        got = monarch.inspect(y, gpus=1)
    assert got.tolist() == expected


def test_reduce_stack_scatter_and_inplace(mesh2: Any) -> None:
    with mesh2.activate():
        x = _per_rank(mesh2)
        stacked = x.reduce("gpus", "stack")
        scattered = x.reduce("gpus", "sum", scatter=True)
        a2a = torch.stack([x, x * 10]).reduce("gpus", "stack", scatter=True)
        assert stacked.shape == (2, 4) and scattered.shape == (2,) and a2a.shape == (2, 4)
        inplace = _per_rank(mesh2)
        same = inplace.reduce_("gpus", "max")
        assert same is inplace
        got = monarch.inspect((stacked, scattered, a2a, inplace), gpus=1)
    assert got[0].tolist() == [[1, 2, 3, 4], [2, 3, 4, 5]]
    assert got[1].tolist() == [7, 9]  # rank 1 keeps the second half of the sum
    assert got[2].tolist() == [[10, 20, 30, 40], [20, 30, 40, 50]]  # each rank's row 1
    assert got[3].tolist() == [2, 3, 4, 5]


def test_reduce_pytree_and_out(mesh2: Any) -> None:
    with mesh2.activate():
        tree = {"a": _per_rank(mesh2), "b": [_per_rank(mesh2) * 2], "n": 7}
        summed = monarch.reduce(tree, "gpus")
        out = torch.zeros(4)
        res = monarch.reduce(_per_rank(mesh2), "gpus", out=out)
        assert res is out
        monarch.reduce_(tree, "gpus", "avg")
        got = monarch.inspect((summed, out, tree))
    assert summed["n"] == 7
    assert got[0]["a"].tolist() == [3, 5, 7, 9] and got[0]["b"][0].tolist() == [6, 10, 14, 18]
    assert got[1].tolist() == [3, 5, 7, 9]
    assert got[2]["a"].tolist() == [1.5, 2.5, 3.5, 4.5]


def test_reduce_over_one_dimension_of_two(mesh4: Any) -> None:
    with mesh4.activate():
        x = mesh4.rank_tensor(("hosts", "gpus")).to(torch.float32)  # 0..3
        over_gpus = x.reduce("gpus")
        over_hosts = x.reduce("hosts")
        over_all = x.reduce(("hosts", "gpus"))
        got = [monarch.inspect((over_gpus, over_hosts, over_all), hosts=h, gpus=g)
               for h in range(2) for g in range(2)]
    assert [float(a) for a, _, _ in got] == [1, 1, 5, 5]
    assert [float(b) for _, b, _ in got] == [2, 4, 2, 4]
    assert all(float(c) == 6 for _, _, c in got)


def test_reduce_bad_arguments(mesh2: Any) -> None:
    with mesh2.activate():
        x = torch.ones(3)
        with pytest.raises(ValueError, match="unknown reduction"):
            x.reduce("gpus", "median")
        with pytest.raises(ValueError, match="not a dimension"):
            x.reduce("hosts")
        with pytest.raises(ValueError, match="divisible"):
            x.reduce("gpus", scatter=True)
        with pytest.raises(ValueError, match="floating"):
            torch.ones(2, dtype=torch.int64).reduce("gpus", "avg")
        with pytest.raises(NotImplementedError):
            x.reduce("gpus", mesh=mesh2)


def test_to_mesh_pipelines_between_stages(mesh4: Any) -> None:
    stage0, stage1 = mesh4.slice(hosts=0), mesh4.slice(hosts=1)
    with stage0.activate():
        act = stage0.rank_tensor("gpus").to(torch.float32) + 10  # 10, 11
    moved = act.to_mesh(stage1)
    with stage1.activate():
        out = moved * 2
        got = [monarch.inspect(out, gpus=g) for g in range(2)]
    assert [float(v) for v in got] == [20.0, 22.0]
    # slice_mesh + to_mesh: gpus=1 of stage 0 broadcast along stage 1's gpus
    with pytest.warns(UserWarning, match="broadcasts"):
        one = monarch.to_mesh(act.slice_mesh(gpus=1), stage1)
    with stage1.activate():
        got = [monarch.inspect(one, gpus=g) for g in range(2)]
    assert [float(v) for v in got] == [11.0, 11.0]


def test_to_mesh_shape_mismatch_is_refused(mesh4: Any) -> None:
    with mesh4.slice(hosts=0).activate():
        a = torch.ones(1)
    with pytest.raises(ValueError, match="not in the target"):
        a.to_mesh(mesh4.slice(hosts=1, gpus=0))
