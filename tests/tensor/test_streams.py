"""Streams, borrows and coalescing."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import monarch


def test_default_stream_and_stream_activation(mesh2: Any) -> None:
    assert monarch.get_active_stream().name == "main"
    s = monarch.Stream("side")
    with s.activate():
        assert monarch.get_active_stream() is s
    with pytest.raises(ValueError, match="name"):
        monarch.Stream("")


def test_read_only_borrow(mesh2: Any) -> None:
    side = monarch.Stream("side_ro")
    with mesh2.activate():
        t = torch.ones(3)
        with side.activate(), pytest.raises(ValueError, match="borrow"):
            t + 1
        t_side, borrow = side.borrow(t)
        with side.activate():
            u = t_side * 5
            with pytest.raises(ValueError, match="read-only"):
                t_side.add_(1)
        v = t + 1  # still readable on main
        with pytest.raises(ValueError, match="read-only"):
            t.add_(1)
        borrow.drop()
        t.add_(1)  # writable again
        with side.activate(), pytest.raises(ValueError, match="dropped"):
            t_side + 1
        with side.activate():
            got_u = monarch.inspect(u)
        got = monarch.inspect((v, t))
    assert got_u.tolist() == [5.0] * 3
    assert got[0].tolist() == [2.0] * 3 and got[1].tolist() == [2.0] * 3


def test_mutable_borrow_gives_exclusive_access(mesh2: Any) -> None:
    side = monarch.Stream("side_mut")
    with mesh2.activate():
        t = torch.zeros(2)
        t_side, borrow = side.borrow(t, mutable=True)
        with pytest.raises(ValueError, match="mutably borrowed"):
            t + 1
        with side.activate():
            t_side.add_(7)
        with borrow:
            pass
        got = monarch.inspect(t)
    assert got.tolist() == [7.0, 7.0]


def test_coalescing_sends_one_batch(mesh2: Any) -> None:
    with mesh2.activate():
        engine = monarch.get_active_mesh()._engine
        engine.flush()
        before = engine.batch_seq
        with monarch.coalescing():
            x = torch.ones(4)
            for _ in range(600):  # more than a batch's limit
                x = x + 1
            assert engine.batch_seq == before
        assert engine.batch_seq == before + 1
        got = monarch.inspect(x)
    assert got.tolist() == [601.0] * 4


def test_fetching_a_tensor_of_another_stream_is_refused(mesh2: Any) -> None:
    """As on torchmonarch: fetch on the tensor's own stream (or borrow it onto the active one)."""
    other = monarch.Stream("fetch_other")
    with mesh2.activate():
        x = torch.ones(2)
        borrowed, borrow = other.borrow(x)
        with other.activate():
            w = borrowed * 10
            assert monarch.inspect(w).tolist() == [10.0, 10.0]
        borrow.drop()
        with pytest.raises(TypeError, match="not the current active stream"):
            monarch.inspect(w)
        with pytest.raises(TypeError, match="not the current active stream"):
            monarch.fetch_shard((x, w), gpus=1)
