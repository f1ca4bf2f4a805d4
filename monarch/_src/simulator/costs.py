"""FLOP and byte counts of one command, and which outputs alias which inputs.

Counts come from the command's `OpMeta` (input and output fake shapes and dtypes) and, for
operators torch's flop counter knows (mm, addmm, bmm, convolutions, attention, ...), from its
formulas applied to the argument shapes. Everything else is costed as elementwise: one FLOP per
output element and every input and output byte moved once. Views (outputs the operator's schema
marks as aliasing an input without writing it) move nothing and allocate nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import re
from typing import TYPE_CHECKING, Any

from monarch._src.tensor.commands import OpMeta, TensorMeta

if TYPE_CHECKING:
    from monarch._src.simulator.profiles import DeviceProfile

__all__ = [
    "OpCost", "alias_map", "dtype_size", "is_view", "nbytes", "op_cost", "op_time",
    "writes_input",
]

logger = logging.getLogger(__name__)

_DTYPE_SIZES = {
    "float64": 8, "double": 8, "complex128": 16, "float32": 4, "float": 4, "complex64": 8,
    "float16": 2, "half": 2, "bfloat16": 2, "int64": 8, "long": 8, "int32": 4, "int": 4,
    "int16": 2, "short": 2, "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1,
    "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "uint16": 2, "uint32": 4,
    "uint64": 8, "complex32": 4,
}


def dtype_size(dtype: str) -> int:
    """Bytes per element of a dtype named like "torch.float32" or "float32"."""
    key = dtype.replace("torch.", "")
    try:
        return _DTYPE_SIZES[key]
    except KeyError:
        raise ValueError(
            f"The simulator does not know the size of dtype {dtype!r}; use a standard torch "
            "dtype."
        ) from None


def nbytes(meta: TensorMeta) -> int:
    """Bytes of a contiguous tensor with this metadata."""
    return math.prod(meta.shape) * dtype_size(meta.dtype)


@dataclasses.dataclass(frozen=True)
class OpCost:
    """What one operator does: FLOPs, bytes moved, and whether it is matmul-class."""

    flops: float
    bytes: float
    matmul: bool


@functools.lru_cache(maxsize=4096)
def _schema_aliases(name: str) -> tuple[tuple[int | None, bool], ...] | None:
    """Per return value: (index of the aliased argument or None, written?); None if unknown."""
    try:
        from monarch._src.tensor.worker import resolve_op

        schema = resolve_op(name)._schema
    except Exception:
        return None
    sets: dict[str, int] = {}
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is not None:
            for s in info.before_set:
                sets.setdefault(s, i)
    out: list[tuple[int | None, bool]] = []
    for ret in schema.returns:
        info = ret.alias_info
        if info is None:
            out.append((None, False))
            continue
        src = next((sets[s] for s in info.before_set if s in sets), None)
        out.append((src, bool(info.is_write)))
    if len(schema.returns) == 1 and str(schema.returns[0].type).startswith("List"):
        # "-> Tensor(a)[]": every element aliases the same way (pybind hides the element's
        # alias set, so read it from the schema text).
        m = re.search(r"->\s*Tensor\((\w+)(!?)\)\[\]", str(schema))
        first = (sets.get(m.group(1)), m.group(2) == "!") if m else (None, False)
        return (first,) * 4096
    return tuple(out)


def alias_map(name: str, n_outputs: int) -> list[tuple[int, str] | None]:
    """For each output of operator `name`: the schema argument it aliases (view or in-place),
    as (position, name), or None when the output is new memory. Unknown operators: all new."""
    aliases = _schema_aliases(name)
    if aliases is None:
        return [None] * n_outputs
    from monarch._src.tensor.worker import resolve_op

    arguments = resolve_op(name)._schema.arguments
    out: list[tuple[int, str] | None] = []
    for j in range(n_outputs):
        src = aliases[j][0] if j < len(aliases) else None
        out.append(None if src is None else (src, arguments[src].name))
    return out


def is_view(name: str, output: int = 0) -> bool:
    """True when output `output` of operator `name` is a view of an input (no write)."""
    aliases = _schema_aliases(name)
    return bool(aliases and output < len(aliases) and aliases[output][0] is not None
                and not aliases[output][1])


def writes_input(name: str, output: int = 0) -> bool:
    """True when output `output` of operator `name` is an input written in place."""
    aliases = _schema_aliases(name)
    return bool(aliases and output < len(aliases) and aliases[output][0] is not None
                and aliases[output][1])


def _flop_formula(name: str) -> Any:
    try:
        import torch
        from torch.utils.flop_counter import flop_registry

        ns, _, rest = name.partition("::")
        packet = getattr(getattr(torch.ops, ns), rest.partition(".")[0])
        return flop_registry.get(packet)
    except Exception:
        return None


def _shapes(tree: Any, shapes: Any) -> Any:
    """`tree` with every `Ref` (and real tensor) replaced by its shape."""
    from monarch._src.tensor.commands import Ref

    if type(tree) is Ref:
        return shapes.get(tree.id, ())
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        return type(tree)(_shapes(x, shapes) for x in tree)
    if isinstance(tree, dict):
        return {k: _shapes(v, shapes) for k, v in tree.items()}
    shape = getattr(tree, "shape", None)
    if shape is not None and hasattr(tree, "dtype"):
        return tuple(shape)
    return tree


def op_cost(meta: OpMeta, args: Any = (), kwargs: Any = None, shapes: Any = None) -> OpCost:
    """FLOPs and bytes of the operator described by `meta` (args give non-tensor arguments
    such as convolution strides to torch's formulas; `shapes` maps value ids to shapes
    through `.get(id, default)`)."""
    out_bytes = sum(nbytes(m) for m in meta.outputs)
    in_bytes = sum(nbytes(m) for m in meta.inputs)
    if meta.outputs and all(is_view(meta.name, j) for j in range(len(meta.outputs))):
        return OpCost(0.0, 0.0, False)
    formula = _flop_formula(meta.name)
    if formula is not None:
        try:
            if shapes is not None:
                a = _shapes(args, shapes)
                k = _shapes(kwargs or {}, shapes)
            else:
                a, k = tuple(m.shape for m in meta.inputs), {}
            out_val = tuple(m.shape for m in meta.outputs)
            flops = float(formula(*a, out_val=out_val[0] if len(out_val) == 1 else out_val, **k))
            return OpCost(flops, float(in_bytes + out_bytes), True)
        except Exception as exc:  # torch's formula does not take these arguments
            logger.debug("monarch: no FLOP formula result for %s (%s: %s); counting its "
                         "output elements instead", meta.name, type(exc).__name__, exc)
    elements = sum(math.prod(m.shape) for m in meta.outputs)
    return OpCost(float(elements), float(in_bytes + out_bytes), False)


def op_time(cost: OpCost, dtype: str, profile: DeviceProfile) -> float:
    """Device seconds of an operator with `cost` under `profile` (roofline plus fixed cost)."""
    share = profile.share
    rate = profile.matmul_rate(dtype, cost.flops) if cost.matmul else (
        profile.elementwise_flops * share)
    compute = cost.flops / rate if rate > 0 else 0.0
    bw = profile.memory_bandwidth * share
    memory = cost.bytes / bw if bw > 0 else 0.0
    return profile.op_overhead + max(compute, memory)
