"""Worker side: executing `Reduce` and `SendTensor` commands over process groups."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monarch._src.tensor.commands import Reduce, SendTensor

if TYPE_CHECKING:
    from monarch._src.tensor.worker import WorkerState

__all__ = ["run_reduce", "run_send"]


def _reduce_op(reduction: str) -> Any:
    import torch.distributed as dist

    return {
        "sum": dist.ReduceOp.SUM,
        "avg": dist.ReduceOp.SUM,  # gloo has no AVG: sum, then divide
        "product": dist.ReduceOp.PRODUCT,
        "min": dist.ReduceOp.MIN,
        "max": dist.ReduceOp.MAX,
        "band": dist.ReduceOp.BAND,
        "bor": dist.ReduceOp.BOR,
        "bxor": dist.ReduceOp.BXOR,
    }[reduction]


def run_reduce(state: WorkerState, cmd: Reduce) -> Any:
    """This rank's result of the collective `cmd`.

    The group first agrees (a one-element MAX all-reduce) whether any member's input is
    poisoned; if one is, nobody runs the collective and every member's output is poisoned,
    naming the failed rank. So a failure never hangs the peers nor gives them garbage.
    """
    import torch
    import torch.distributed as dist

    from monarch._src.tensor.errors import WorkerError
    from monarch._src.tensor.worker import _Poisoned

    members = next(g for g in cmd.groups if state.rank in g)
    bad: _Poisoned | None = None
    x: Any = None
    try:
        x = state.get(cmd.src)
    except _Poisoned as p:
        bad = p
    if len(members) > 1:
        device = x.device if x is not None else torch.device(cmd.meta.inputs[0].device)
        pg = state.groups.get(members, device)
        flag = torch.tensor([0 if bad is None else state.rank + 1], dtype=torch.int64,
                            device=device)
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp(dist.ReduceOp.MAX)
        pg.allreduce([flag], opts).wait()
        failed = int(flag.item()) - 1
        if failed >= 0 and bad is None:
            raise _Poisoned(WorkerError(cmd.seq, failed, (
                f"An input of this collective (over engine ranks {list(members)}) failed on "
                f"rank {failed}; fetch that input on rank {failed} for the original error.\n"
            )))
    if bad is not None:
        raise bad
    return _reduce(state, cmd, x)


def _reduce(state: WorkerState, cmd: Reduce, x: Any) -> Any:
    import torch
    import torch.distributed as dist

    members = next(g for g in cmd.groups if state.rank in g)
    n = len(members)
    if cmd.reduction == "stack":
        if n == 1:
            return x.unsqueeze(0).clone() if not cmd.scatter else x.clone()
        pg = state.groups.get(members, x.device)
        src = x.contiguous()
        if cmd.scatter:
            out = torch.empty_like(src)
            pg.alltoall_base(out, src, [], []).wait()
        else:
            out = src.new_empty((n, *src.shape))
            pg.allgather([list(out.unbind(0))], [src]).wait()
        return out
    op = _reduce_op(cmd.reduction)
    if cmd.scatter:
        chunk = x.shape[0] // n
        if n == 1:
            out = x.clone()
        else:
            pg = state.groups.get(members, x.device)
            out = x.new_empty((chunk, *x.shape[1:]))
            opts = dist.ReduceScatterOptions()
            opts.reduceOp = op
            pg._reduce_scatter_base(out, x.contiguous(), opts).wait()
    else:
        if cmd.inplace and x.is_contiguous():
            out = x
        else:
            out = state.take_buffer(x)
            out.copy_(x)
        if n > 1:
            pg = state.groups.get(members, x.device)
            ar_opts = dist.AllreduceOptions()
            ar_opts.reduceOp = op
            pg.allreduce([out], ar_opts).wait()
    if cmd.reduction == "avg":
        out.div_(n)
    if cmd.inplace and out is not x:
        x.copy_(out.view_as(x) if not cmd.scatter else out)
        return x
    return out


def run_send(state: WorkerState, cmd: SendTensor) -> None:
    """Send or receive this rank's part of `cmd`.

    Each transfer is preceded by a one-element flag saying whether the sender's value is
    poisoned; a receiver of a poisoned value poisons its output instead of waiting for data.
    """
    import torch

    from monarch._src.tensor.errors import WorkerError
    from monarch._src.tensor.worker import _Poisoned

    meta = cmd.meta.outputs[0]
    rank = state.rank
    device = torch.device(meta.device)
    sends: list[tuple[Any, Any, int]] = []  # (group, value or None if poisoned, peer index)
    recvs: list[tuple[Any, Any, int, int]] = []  # (group, flag, peer index, peer rank)
    works = []
    for src, dst in cmd.pairs:
        if src == dst == rank:
            state.values[cmd.out] = state.get(cmd.src).clone()
            continue
        if rank not in (src, dst):
            continue
        members = (min(src, dst), max(src, dst))
        pg = state.groups.get(members, device)
        if rank == src:
            try:
                x = state.get(cmd.src).contiguous()
            except _Poisoned:
                x = None
            flag = torch.tensor([0 if x is not None else 1], dtype=torch.int64, device=device)
            works.append(pg.send([flag], members.index(dst), 0))
            sends.append((pg, x, members.index(dst)))
        else:
            flag = torch.empty(1, dtype=torch.int64, device=device)
            works.append(pg.recv([flag], members.index(src), 0))
            recvs.append((pg, flag, members.index(src), src))
    for work in works:
        work.wait()
    works = []
    for pg, x, peer in sends:
        if x is not None:
            works.append(pg.send([x], peer, 1))
    received = []
    for pg, flag, peer, peer_rank in recvs:
        if int(flag.item()):
            state.values.pop(cmd.out, None)
            state.poisoned[cmd.out] = WorkerError(cmd.seq, peer_rank, (
                f"The value moved here by to_mesh failed on rank {peer_rank}; fetch it there "
                "for the original error.\n"
            ))
            continue
        dtype = getattr(torch, meta.dtype.replace("torch.", ""))
        buf = torch.empty(meta.shape, dtype=dtype, device=device)
        works.append(pg.recv([buf], peer, 1))
        received.append(buf)
    for work in works:
        work.wait()
    for buf in received:
        state.values[cmd.out] = buf
        state.poisoned.pop(cmd.out, None)
