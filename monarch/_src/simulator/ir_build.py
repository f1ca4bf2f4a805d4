"""The `IRGraph` of a simulator session: its command history, command by command.

Each tensor-engine command becomes one control-DAG node per worker that runs it, named as
torchmonarch names them: `CallOp`/`CallRemote` "CallFunction: aten.mm" (the operator without
its overload), `Reduce` "Reduce: <all_reduce|reduce_scatter|all_gather|all_to_all>: <out>" (the
node's devices are its group), `SendTensor` "SendTensor: <out>" (on every sender and receiver,
devices senders first), `Borrow` "BorrowCreate: <out>" on the borrowing stream and, when
dropped, "BorrowDrop: <out>" on the lending one (this engine has no separate first/last-use
commands). Actor calls are not tensor operations and make no node. Command ids are the engine's
sequence numbers; a deletion carries the id of the last command before it.

Tensors are named by their value ids. A value made as a view or in-place result of an input
(by the operator's schema, `costs.alias_map`), an in-place collective's result and a borrow
share the storage of what they alias; any other output is a new storage of `numel * itemsize`
bytes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from monarch._src.simulator.costs import alias_map, nbytes, writes_input
from monarch._src.simulator.ir import IRGraph
from monarch._src.tensor.commands import (
    Borrow,
    CallOp,
    CallRemote,
    Delete,
    Reduce,
    Ref,
    SendTensor,
    TensorMeta,
)

__all__ = ["build_ir", "op_label", "reduce_kind"]


def op_label(name: str) -> str:
    """"aten::mul.Tensor" -> "aten.mul" (the IR's operator names carry no overload)."""
    ns, sep, rest = name.partition("::")
    return f"{ns}.{rest.partition('.')[0]}" if sep else name


def reduce_kind(reduction: str, scatter: bool) -> str:
    """The collective a `Reduce` command is."""
    if reduction == "stack":
        return "all_to_all" if scatter else "all_gather"
    return "reduce_scatter" if scatter else "all_reduce"


def _dtype(meta: TensorMeta) -> Any:
    import torch

    return getattr(torch, meta.dtype.replace("torch.", ""), meta.dtype)


def _arg_id(args: Any, kwargs: Any, where: tuple[int, str] | None) -> int | None:
    if where is None:
        return None
    pos, name = where
    value = None
    if isinstance(args, (list, tuple)) and pos < len(args):
        value = args[pos]
    elif isinstance(kwargs, dict):
        value = kwargs.get(name)
    return value.id if type(value) is Ref else None


class _Builder:
    def __init__(self, ir: IRGraph, world: int) -> None:
        self.ir = ir
        self.world = world
        self.storage: dict[int, int] = {}  # value id -> storage key
        self.meta: dict[int, TensorMeta] = {}
        self.where: dict[int, tuple[list[int], str]] = {}  # value id -> (ranks, stream)
        self.borrows: dict[int, tuple[int, str]] = {}  # borrow out -> (create id, lender)
        self.keys = itertools.count()
        self.last = 0  # the last command id seen

    def ranks(self, ranks: tuple[int, ...] | None) -> list[int]:
        return list(range(self.world)) if ranks is None else list(ranks)

    def touch(self, ident: int, ranks: Iterable[int], stream: str, cid: int, *,
              share: int | None = None, mutate: bool = False, borrow: int | None = None) -> None:
        """Value `ident` is used (or made) by command `cid` on `ranks`; a new value takes the
        storage of value `share` when given, else a new one."""
        meta = self.meta.get(ident)
        if meta is None:
            return  # not a tensor the simulator knows the shape of (an opaque value)
        ranks = list(ranks)
        if not ranks:
            return
        if ident not in self.storage:
            shared = self.storage.get(share) if share is not None else None
            self.storage[ident] = next(self.keys) if shared is None else shared
        self.where.setdefault(ident, (ranks, stream))
        for rank in ranks:
            self.ir.update_tensor(self.storage[ident], ident, _dtype(meta), meta.shape, rank,
                                  stream, cid, mutate=mutate, borrow_src_tensor_ref=borrow,
                                  tensor_size=nbytes(meta))

    def node(self, ranks: Iterable[int], stream: str, cid: int, name: str,
             devices: list[int] | None = None, deps: list[int] | None = None) -> None:
        for rank in ranks:
            self.ir.insert_node(rank, stream, cid, name,
                                [rank] if devices is None else devices, deps or [], ())

    def add(self, cmd: Any) -> None:
        kind = type(cmd)
        if kind is Delete:
            for ident in cmd.ids:
                self.forget(ident, self.last)
            return
        cid = self.last = cmd.seq
        if kind is CallOp or kind is CallRemote:
            self.call(cmd)
        elif kind is Reduce:
            self.reduce(cmd)
        elif kind is SendTensor:
            self.send(cmd)
        elif kind is Borrow:
            self.borrow(cmd, cid)

    def call(self, cmd: CallOp | CallRemote) -> None:
        ranks = self.ranks(cmd.ranks)
        aliases: list[tuple[int, str] | None]
        if isinstance(cmd, CallOp):
            label = op_label(cmd.op)
            aliases = alias_map(cmd.op, len(cmd.outputs))
        else:
            fn = cmd.fn if isinstance(cmd.fn, str) else getattr(cmd.fn, "__qualname__", "remote")
            label, aliases = cmd.meta.name or fn, [None] * len(cmd.outputs)
        self.node(ranks, cmd.stream, cmd.seq, f"CallFunction: {label}")
        for read, meta in zip(cmd.inputs, cmd.meta.inputs, strict=False):
            self.meta.setdefault(read, meta)
            self.touch(read, ranks, cmd.stream, cmd.seq)
        for j, ident in enumerate(cmd.outputs):
            if ident is None or j >= len(cmd.meta.outputs):
                continue
            self.meta.setdefault(ident, cmd.meta.outputs[j])
            where = aliases[j] if j < len(aliases) else None
            src = _arg_id(cmd.args, cmd.kwargs, where)
            mutate = isinstance(cmd, CallOp) and src is not None and writes_input(cmd.op, j)
            self.touch(ident, ranks, cmd.stream, cmd.seq, share=src, mutate=mutate)

    def reduce(self, cmd: Reduce) -> None:
        ranks = set(self.ranks(cmd.ranks))
        name = f"Reduce: {reduce_kind(cmd.reduction, cmd.scatter)}: {cmd.out}"
        if cmd.meta.inputs:
            self.meta.setdefault(cmd.src, cmd.meta.inputs[0])
        if cmd.meta.outputs:
            self.meta.setdefault(cmd.out, cmd.meta.outputs[0])
        for group in cmd.groups:
            members = [r for r in group if r in ranks]
            self.node(members, cmd.stream, cmd.seq, name, devices=list(group))
            self.touch(cmd.src, members, cmd.stream, cmd.seq)
            self.touch(cmd.out, members, cmd.stream, cmd.seq,
                       share=cmd.src if cmd.inplace else None, mutate=cmd.inplace)

    def send(self, cmd: SendTensor) -> None:
        srcs = sorted({s for s, _ in cmd.pairs})
        dsts = sorted({d for _, d in cmd.pairs})
        name = f"SendTensor: {cmd.out}"
        self.node(sorted({*srcs, *dsts}), cmd.stream, cmd.seq, name, devices=srcs + dsts)
        if cmd.meta.inputs:
            self.meta.setdefault(cmd.src, cmd.meta.inputs[0])
        out_meta = cmd.meta.outputs[0] if cmd.meta.outputs else self.meta.get(cmd.src)
        if out_meta is not None:
            self.meta.setdefault(cmd.out, out_meta)
            self.ir.add_sendtensor(cmd.out, srcs, cmd.stream, dsts, cmd.stream, out_meta.shape)
        self.touch(cmd.src, srcs, cmd.stream, cmd.seq)
        self.touch(cmd.out, dsts, cmd.stream, cmd.seq)

    def borrow(self, cmd: Borrow, cid: int) -> None:
        ranks = self.ranks(cmd.ranks)
        lender = self.where.get(cmd.src, (ranks, cmd.stream))[1]
        if cmd.drop:
            created = self.borrows.pop(cmd.out, (cid, lender))
            self.node(ranks, created[1], cid, f"BorrowDrop: {cmd.out}", deps=[created[0]])
            self.forget(cmd.out, cid)
            return
        self.borrows[cmd.out] = (cid, lender)
        self.node(ranks, cmd.stream, cid, f"BorrowCreate: {cmd.out}")
        for rank in ranks:
            self.ir.add_borrow(cmd.out, rank, lender, cmd.stream, cid)
        if cmd.src in self.meta:
            self.meta.setdefault(cmd.out, self.meta[cmd.src])
            self.touch(cmd.out, ranks, cmd.stream, cid, share=cmd.src, borrow=cmd.src)

    def forget(self, ident: int, cid: int) -> None:
        place = self.where.pop(ident, None)
        self.storage.pop(ident, None)
        self.meta.pop(ident, None)
        if place is not None:
            self.ir.delete_tensor(ident, place[0], place[1], cid, ())


def build_ir(history: Iterable[tuple[str, float, Any]], world: int) -> IRGraph:
    """The IR of a session's `history` (its "batch" entries) over `world` workers."""
    ir = IRGraph()
    builder = _Builder(ir, world)
    for kind, _, data in history:
        if kind == "batch":
            for cmd in data[0]:
                builder.add(cmd)
    ir.convert_devices_to_meshes()
    return ir
