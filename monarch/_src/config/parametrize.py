"""Pytest helpers that run one test under several configurations.

`parametrize_config(cleanup_timeout={"1s", "5s"}, enable_tls={True, False})` runs the test four
times (the cartesian product); `parametrize_config_pointwise(a=[1, 2], b=[3, 4])` runs it twice
(the values zipped). Each run wraps the test body in `configured(...)`. The configuration travels
as a hidden keyword argument that pytest parametrizes; the wrapper's signature advertises it so
pytest will pass it. pytest (and inspect) are imported only when a helper is called, never by
`monarch.config`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    import inspect

from monarch._src.config.api import configured
from monarch._src.config.registry import lookup
from monarch._src.config.validate import check_value

__all__ = ["parametrize_config", "parametrize_config_pointwise"]

_F = TypeVar("_F", bound=Callable[..., Any])

# Each application gets its own hidden argument name so the helpers can be stacked.
_counter = itertools.count()


def _ordered(values: Iterable[object]) -> list[object]:
    """Sets have no order; sort them by repr so test ids are the same in every process."""
    if isinstance(values, (set, frozenset)):
        return sorted(values, key=repr)
    return list(values)


def _value_id(value: object) -> str:
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)


def _case_id(case: dict[str, object]) -> str:
    return "-".join(f"{key}={_value_id(value)}" for key, value in case.items())


def _check_cases(cases: list[dict[str, object]]) -> None:
    """Fail at decoration (collection) time, not when each test runs."""
    for case in cases:
        for name, value in case.items():
            check_value(lookup(name), value)


def _with_hidden_keyword(fn: Callable[..., Any], hidden: str) -> inspect.Signature:
    import inspect

    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    extra = inspect.Parameter(hidden, inspect.Parameter.KEYWORD_ONLY)
    at = len(params)
    if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD:
        at -= 1
    params.insert(at, extra)
    return signature.replace(parameters=params)


def _decorator(cases: list[dict[str, object]]) -> Callable[[_F], _F]:
    import pytest

    _check_cases(cases)
    hidden = f"_monarch_config_{next(_counter)}"
    params = [pytest.param(case, id=_case_id(case)) for case in cases]

    def decorate(fn: _F) -> _F:
        import inspect

        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                overrides = kwargs.pop(hidden)
                with configured(**overrides):
                    return await fn(*args, **kwargs)

            wrapper = async_wrapper
        else:

            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                overrides = kwargs.pop(hidden)
                with configured(**overrides):
                    return fn(*args, **kwargs)

            wrapper = sync_wrapper
        # inspect.signature (and so pytest) stops unwrapping at an explicit __signature__.
        # setattr because mypy does not know functions carry a __signature__.
        setattr(wrapper, "__signature__", _with_hidden_keyword(fn, hidden))  # noqa: B010
        marked = pytest.mark.parametrize(hidden, params)(wrapper)
        return cast(_F, marked)

    return decorate


def parametrize_config(**values: Collection[object]) -> Callable[[_F], _F]:
    """Parametrize a pytest test over the cartesian product of the given config values."""
    if not values:
        raise ValueError("parametrize_config needs at least one config key.")
    names = list(values)
    product = itertools.product(*(_ordered(values[name]) for name in names))
    return _decorator([dict(zip(names, combo)) for combo in product])


def parametrize_config_pointwise(**values: Sequence[object]) -> Callable[[_F], _F]:
    """Parametrize a pytest test over the config values zipped position by position.

    Every list must have the same length; otherwise ValueError names the lengths.
    """
    if not values:
        raise ValueError("parametrize_config_pointwise needs at least one config key.")
    names = list(values)
    columns = [_ordered(values[name]) for name in names]
    lengths = {name: len(column) for name, column in zip(names, columns)}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}={length}" for name, length in lengths.items())
        raise ValueError(
            f"parametrize_config_pointwise needs value lists of equal length, got {described}."
        )
    return _decorator([dict(zip(names, row)) for row in zip(*columns)])
