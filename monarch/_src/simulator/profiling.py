"""What one operator call costs, by its name and input shapes: measured on a GPU
(`profile_function`, torchmonarch's name) or estimated from a device profile
(`estimate_function_us`, this simulator's roofline model, `costs.py`).

Operators are named as in the IR's timing keys: "aten.mm" (an ATen overload packet, looked up
under `torch.ops`) or a dotted path ("torch.nn.functional.relu"); `expand_func_path` gives the
importable path.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from typing import Any

from monarch._src.simulator.costs import op_cost, op_time
from monarch._src.simulator.profiles import DeviceProfile, get_profile
from monarch._src.tensor.commands import OpMeta, TensorMeta

__all__ = ["estimate_function_us", "expand_func_path", "profile_function", "resolve_function"]

Shapes = Sequence[tuple[tuple[int, ...], Any]]  # (dims, torch.dtype or None) per input tensor
_CREATION = ("rand", "randn", "zeros", "ones", "empty", "full")


def expand_func_path(func_name: str) -> str:
    """The importable path of operator `func_name`: "aten.mm" -> "torch.ops.aten.mm"."""
    return f"torch.ops.{func_name}" if func_name.startswith("aten.") else func_name


def resolve_function(func_name: str) -> Any:
    """The callable named `func_name` (see `expand_func_path`)."""
    path = expand_func_path(func_name)
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        return obj
    raise ValueError(
        f"Cannot resolve operator {func_name!r}: give an ATen name such as 'aten.mm' or an "
        "importable dotted path such as 'torch.nn.functional.relu'."
    )


def _arguments(func_name: str, shapes: Shapes, device: str) -> tuple[list[Any], dict[str, Any]]:
    """Inputs of the given shapes for `func_name`: a size for creation operators, a reversed
    dimension order for permutes, otherwise one random tensor per shape (a binary operator
    given one shape gets it twice)."""
    import torch

    dtype = shapes[0][1] if shapes and shapes[0][1] is not None else torch.float32
    leaf = func_name.rsplit(".", 1)[-1]
    if leaf.split("_")[0] in _CREATION:
        size = list(shapes[0][0]) if shapes else [1]
        return [size], {"dtype": dtype, "device": device}
    tensors = [torch.randn(dims, dtype=dt or torch.float32, device=device) for dims, dt in shapes]
    if leaf in ("permute", "transpose") and tensors:
        dims = list(range(tensors[0].dim() - 1, -1, -1))
        if leaf == "permute":
            return [tensors[0], dims], {}
        return [tensors[0], 0, max(len(dims) - 1, 0)], {}
    if len(tensors) == 1 and leaf.rstrip("_") in ("mul", "add", "sub", "div", "pow"):
        tensors.append(tensors[0].clone())
    return list(tensors), {}


def profile_function(func_path: str, shapes: Shapes, *, warmup: int = 2, runs: int = 5) -> int:
    """Mean microseconds of `func_path` on inputs of `shapes`, measured on this machine's GPU
    with CUDA events. Raises `RuntimeError` without CUDA (use `estimate_function_us`)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            f"profile_function({func_path!r}) measures on a GPU and CUDA is not available here; "
            "use estimate_function_us for a device-profile estimate."
        )
    fn = resolve_function(func_path)
    args, kwargs = _arguments(func_path, shapes, "cuda")
    for _ in range(warmup):
        fn(*args, **kwargs)
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    torch.cuda.synchronize()
    start.record()
    for _ in range(runs):
        fn(*args, **kwargs)
    end.record()
    torch.cuda.synchronize()
    millis: float = start.elapsed_time(end)
    return max(1, round(millis * 1000 / runs))


def estimate_function_us(func_path: str, shapes: Shapes,
                         profile: str | DeviceProfile = "H100") -> int:
    """Microseconds the simulator's roofline model gives `func_path` on inputs of `shapes`
    under device `profile`; the output shapes come from running it on meta tensors."""
    import torch

    fn = resolve_function(func_path)
    args, kwargs = _arguments(func_path, shapes, "meta")
    result = fn(*args, **kwargs)
    leaves = result if isinstance(result, (list, tuple)) else [result]

    def meta_of(t: Any) -> TensorMeta:
        return TensorMeta(tuple(t.shape), str(t.dtype), "cuda")

    inputs = tuple(meta_of(a) for a in args if isinstance(a, torch.Tensor))
    outputs = tuple(meta_of(t) for t in leaves if isinstance(t, torch.Tensor))
    name = func_path.replace("aten.", "aten::", 1) if func_path.startswith("aten.") else func_path
    cost = op_cost(OpMeta(name, inputs, outputs))
    dtype = (outputs or inputs)[0].dtype if (outputs or inputs) else "torch.float32"
    seconds = op_time(cost, dtype, get_profile(profile))
    return max(1, math.ceil(seconds * 1e6))
