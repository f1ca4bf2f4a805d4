"""Errors: a failing op poisons only its dependents; workers survive."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import monarch
from monarch.mesh_controller import RemoteException


def test_failure_poisons_dependents_only_and_names_rank(mesh2: Any) -> None:
    fail = monarch.remote("tests.tensor.remote_fns.fail_always", propagate=lambda x: x)
    with mesh2.activate():
        x = torch.ones(3)
        bad = fail(x)  # this line is in the controller traceback
        worse = (bad * 2).sum()
        fine = x + 1
        with pytest.raises(RemoteException) as info:
            monarch.inspect(worse, gpus=1)
        text = str(info.value)
        assert text.startswith("A remote function has failed asynchronously on rank 1")
        assert "remote function failed on purpose" in text  # the worker's error
        assert "test_errors.py" in text and "bad = fail(x)" in text  # where it was issued
        assert info.value.rank == 1
        got = monarch.inspect(fine)
        after = monarch.inspect(x * 3)  # the workers survived
    assert torch.equal(got, torch.full((3,), 2.0))
    assert torch.equal(after, torch.full((3,), 3.0))


def test_failing_torch_op_on_worker_is_reported(mesh2: Any) -> None:
    def bad_index(x: torch.Tensor) -> torch.Tensor:
        return x[torch.tensor([99])]  # out of range only on the worker

    with mesh2.activate():
        x = torch.ones(3)
        y = monarch.remote(bad_index, propagate=lambda x: torch.empty(1))(x)
        with pytest.raises(RemoteException, match="index 99 is out of bounds"):
            monarch.inspect(y)
        # an in-place op on a poisoned tensor keeps it poisoned
        y.add_(1)
        with pytest.raises(RemoteException):
            monarch.inspect(y)


def test_remote_exception_pickles() -> None:
    import pickle

    exc = RemoteException(3, "worker text\n", "controller text\n")
    again = pickle.loads(pickle.dumps(exc))
    assert str(again) == str(exc) and again.rank == 3


def test_controller_side_shape_errors_raise_immediately(mesh2: Any) -> None:
    with mesh2.activate():
        with pytest.raises(RuntimeError):
            torch.ones(2, 3) @ torch.ones(4, 5)
        assert monarch.inspect(torch.ones(1)).shape == (1,)


def test_unpicklable_argument_poisons_only_its_outputs(mesh2: Any) -> None:
    import threading

    keep = monarch.remote("tests.tensor.remote_fns.add_rank_bias", propagate=lambda x, b: x)
    with mesh2.activate():
        x = torch.ones(2)
        bad = keep(x, threading.Lock())  # a lock cannot be pickled
        good = x + 1
        with pytest.raises(RemoteException, match="could not be sent"):
            monarch.inspect(bad)
        assert monarch.inspect(good).tolist() == [2.0, 2.0]


def test_poison_on_one_rank_poisons_collective_and_moves(mesh2: Any) -> None:
    part = monarch.remote("tests.tensor.remote_fns.fail_on_rank_one", propagate=lambda x: x)
    with mesh2.activate():
        x = part(torch.ones(2))
        ok0 = monarch.inspect(x, gpus=0)
        total = x.reduce("gpus")
        with pytest.raises(RemoteException, match="failed on rank 1") as info:
            monarch.inspect(total, gpus=0)
        assert info.value.rank == 1
        with pytest.raises(RemoteException, match="rank one failed on purpose"):
            monarch.inspect(total, gpus=1)
        after = monarch.inspect(torch.ones(2).reduce("gpus"))  # the group still works
    moved = x.slice_mesh(gpus=1).to_mesh(mesh2.slice(gpus=0))
    with mesh2.slice(gpus=0).activate(), pytest.raises(RemoteException, match="to_mesh failed"):
        monarch.inspect(moved)
    assert ok0.tolist() == [1.0, 1.0] and after.tolist() == [2.0, 2.0]
