"""The execution and memory model, driven by hand-built command streams (no engine, no time)."""

from __future__ import annotations

import pytest

from monarch._src.simulator.model import SimulationModel
from monarch._src.simulator.network import CommModel
from monarch._src.simulator.profiles import H100
from monarch._src.tensor.commands import (
    Borrow,
    CallOp,
    Delete,
    OpMeta,
    Reduce,
    Ref,
    SendTensor,
    TensorMeta,
)

F32 = "torch.float32"


def tm(*shape: int, dtype: str = F32) -> TensorMeta:
    return TensorMeta(tuple(shape), dtype, "cuda")


def make(seq: int, op: str, args: tuple, inputs: tuple, outputs: tuple, ins: tuple, outs: tuple,
         stream: str = "main", ranks: tuple | None = None) -> CallOp:
    return CallOp(seq, ranks, stream, op, args, {}, inputs, outputs, OpMeta(op, ins, outs))


def zeros(seq: int, ident: int, *shape: int, stream: str = "main", dtype: str = F32) -> CallOp:
    return make(seq, "aten::zeros", (list(shape),), (), (ident,), (), (tm(*shape, dtype=dtype),),
                stream=stream)


def model(world: int = 1, profile=H100, comm: CommModel | None = None) -> SimulationModel:
    return SimulationModel(world, profile, comm or CommModel())


def test_views_share_storage_and_frees_are_counted() -> None:
    m = model()
    m.run_batch([
        zeros(1, 1, 1024, 256),  # 1 MiB
        make(2, "aten::view", (Ref(1), [256, 1024]), (1,), (2,), (tm(1024, 256),),
             (tm(256, 1024),)),
        make(3, "aten::t", (Ref(1),), (1,), (3,), (tm(1024, 256),), (tm(256, 1024),)),
        make(4, "aten::add_.Tensor", (Ref(1), 1.0), (1,), (1,), (tm(1024, 256),),
             (tm(1024, 256),)),
        make(5, "aten::mul.Tensor", (Ref(2), 2.0), (2,), (4,), (tm(256, 1024),),
             (tm(256, 1024),)),  # new 1 MiB
        Delete((2, 3)),
        zeros(6, 5, 512, 512, dtype="torch.float64"),  # 2 MiB: peak 4 MiB
        Delete((4,)),
    ], 0.0)
    w = m.workers[0]
    assert w.peak == 4 * 2**20
    assert w.live == 3 * 2**20
    m.run_batch([Delete((1,))], 1.0)  # the base of the deleted views: its storage goes now
    assert w.live == 2 * 2**20
    m.run_batch([Delete((5,))], 2.0)
    assert w.live == 0
    assert [e.delta for e in w.memory] == [2**20, 2**20, 2 * 2**20, -(2**20), -(2**20),
                                           -2 * 2**20]


def test_view_kept_alive_after_base_deleted() -> None:
    m = model()
    m.run_batch([
        zeros(1, 1, 256, 256),
        make(2, "aten::view", (Ref(1), [-1]), (1,), (2,), (tm(256, 256),), (tm(65536),)),
        Delete((1,)),
    ], 0.0)
    assert m.workers[0].live == 256 * 256 * 4  # the view still names the storage
    m.run_batch([Delete((2,))], 0.0)
    assert m.workers[0].live == 0


def test_outputs_not_kept_count_towards_peak_only() -> None:
    m = model()
    m.run_batch([
        zeros(1, 1, 1000),
        make(2, "aten::mul.Tensor", (Ref(1), 2.0), (1,), (None,), (tm(1000),), (tm(1000),)),
    ], 0.0)
    w = m.workers[0]
    assert w.peak == 8000
    assert w.live == 4000


def test_memory_is_charged_to_the_creating_stream() -> None:
    m = model()
    m.run_batch([
        zeros(1, 1, 1000),
        zeros(2, 2, 500, stream="side"),
        Borrow(3, None, "side", 1, 3, False, False),  # shares id 1's storage: no new bytes
    ], 0.0)
    w = m.workers[0]
    assert w.stream_peak == {"main": 4000, "side": 2000}
    assert w.live == 6000
    m.run_batch([Borrow(4, None, "side", 1, 3, False, True), Delete((1,))], 0.0)
    assert w.stream_live == {"main": 0, "side": 2000}


def test_cross_stream_dependency_waits_for_the_producer() -> None:
    m = model()
    big = (8192, 8192)
    m.run_batch([
        zeros(1, 1, *big),
        make(2, "aten::mm", (Ref(1), Ref(1)), (1,), (2,), (tm(*big), tm(*big)), (tm(*big),)),
        make(3, "aten::relu", (Ref(2),), (2,), (3,), (tm(*big),), (tm(*big),), stream="other"),
        zeros(4, 4, 10, stream="other"),
    ], 0.0)
    tasks = {t.seq: t for t in m.workers[0].tasks}
    assert tasks[3].start == pytest.approx(tasks[2].end)  # waited across streams
    assert tasks[2].end - tasks[2].start > 1e-3  # 1.1 TFLOP at ~350 TFLOP/s
    # An independent task on "other" may run before the relu finishes? No: streams are in order.
    assert tasks[4].start >= tasks[3].end


def test_independent_streams_overlap() -> None:
    m = model()
    big = (8192, 8192)
    m.run_batch([
        zeros(1, 1, *big),
        zeros(2, 2, *big, stream="other"),
        make(3, "aten::mm", (Ref(1), Ref(1)), (1,), (3,), (tm(*big), tm(*big)), (tm(*big),)),
        make(4, "aten::mm", (Ref(2), Ref(2)), (2,), (4,), (tm(*big), tm(*big)), (tm(*big),),
             stream="other"),
    ], 0.0)
    tasks = {t.seq: t for t in m.workers[0].tasks}
    assert tasks[4].start < tasks[3].end  # the GPU profile is asynchronous: streams overlap


def test_collective_finishes_when_every_member_arrived() -> None:
    m = model(world=2)
    big = (8192, 8192)
    m.run_batch([
        zeros(1, 1, *big),
        # only rank 1 does heavy work before the reduce
        make(2, "aten::mm", (Ref(1), Ref(1)), (1,), (2,), (tm(*big), tm(*big)), (tm(*big),),
             ranks=(1,)),
        Reduce(3, None, "main", 1, 3, ((0, 1),), "sum", False, False,
               OpMeta("reduce", (tm(*big),), (tm(*big),))),
    ], 0.0)
    r0 = next(t for t in m.workers[0].tasks if t.category == "collective")
    r1 = next(t for t in m.workers[1].tasks if t.category == "collective")
    mm = next(t for t in m.workers[1].tasks if t.name == "aten::mm")
    assert r0.start == r1.start == pytest.approx(mm.end)
    assert r0.end == r1.end
    expected = CommModel().collective_time("all_reduce", 8192 * 8192 * 4, (0, 1))
    # The engine's agreement on failed inputs: an 8-byte all-reduce first.
    agree = CommModel().collective_time("all_reduce", 8, (0, 1))
    assert r0.end - r0.start == pytest.approx(expected + agree + H100.op_overhead)
    # non-inplace: a new output on both ranks
    assert m.workers[0].peak == 2 * 8192 * 8192 * 4


def test_inplace_reduce_allocates_nothing() -> None:
    m = model(world=2)
    m.run_batch([
        zeros(1, 1, 100),
        Reduce(2, None, "main", 1, 1, ((0, 1),), "avg", False, True,
               OpMeta("reduce", (tm(100),), (tm(100),))),
    ], 0.0)
    assert m.workers[0].peak == 400 and m.workers[1].live == 400


def test_send_moves_a_value_between_ranks() -> None:
    m = model(world=2)
    m.run_batch([
        zeros(1, 1, 1000),
        SendTensor(2, None, "main", 1, 2, ((0, 1),), OpMeta("send", (tm(1000),), (tm(1000),))),
    ], 0.0)
    assert m.workers[1].live == 8000 and m.workers[0].live == 4000
    s0 = next(t for t in m.workers[0].tasks if t.category == "transfer")
    s1 = next(t for t in m.workers[1].tasks if t.category == "transfer")
    assert (s0.start, s0.end) == (s1.start, s1.end)


def test_inplace_write_waits_for_readers_on_other_streams() -> None:
    m = model()
    big = (8192, 8192)
    m.run_batch([
        zeros(1, 1, *big),
        Borrow(2, None, "other", 1, 2, False, False),
        make(3, "aten::mm", (Ref(2), Ref(2)), (2,), (3,), (tm(*big), tm(*big)), (tm(*big),),
             stream="other"),
        Borrow(4, None, "other", 1, 2, False, True),
        make(5, "aten::add_.Tensor", (Ref(1), 1.0), (1,), (1,), (tm(*big),), (tm(*big),)),
    ], 0.0)
    tasks = {t.seq: t for t in m.workers[0].tasks}
    assert tasks[5].start >= tasks[3].end


def test_mutable_borrow_drop_makes_the_lender_wait() -> None:
    m = model()
    big = (8192, 8192)
    m.run_batch([
        zeros(1, 1, *big),
        Borrow(2, None, "other", 1, 2, True, False),
        make(3, "aten::mul_.Scalar", (Ref(2), 2.0), (2,), (2,), (tm(*big),), (tm(*big),),
             stream="other"),
        Borrow(4, None, "other", 1, 2, True, True),
        make(5, "aten::relu", (Ref(1),), (1,), (5,), (tm(*big),), (tm(*big),)),
    ], 0.0)
    tasks = {t.seq: t for t in m.workers[0].tasks}
    assert tasks[5].start >= tasks[3].end
    assert m.workers[0].peak == 2 * 8192 * 8192 * 4  # mul_ in place, relu new


def test_ranks_subset_and_fetch() -> None:
    m = model(world=2)
    m.run_batch([zeros(1, 1, 100), make(2, "aten::relu", (Ref(1),), (1,), (2,), (tm(100),),
                                        (tm(100),), ranks=(1,))], 0.0)
    assert len(m.workers[0].tasks) == 1 and len(m.workers[1].tasks) == 2
    done = m.fetch(1, [2], 0.0)
    assert done >= m.workers[1].tasks[-1].end + H100.message_latency


def test_unknown_command_is_rejected() -> None:
    with pytest.raises(TypeError, match="cannot model command"):
        model().run_batch([object()], 0.0)


def test_world_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        SimulationModel(0, H100, CommModel())
