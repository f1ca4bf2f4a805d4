"""`Accumulator`: a client-side left fold over an endpoint's streamed replies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from monarch._src.mesh.endpoint import Endpoint
from monarch._src.runtime.future import Future

__all__ = ["Accumulator"]

P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A")


class Accumulator(Generic[P, R, A]):
    """`Accumulator(endpoint, identity, combine).accumulate(*args)` folds the replies of
    `endpoint.stream(*args)` in arrival order, starting from `identity`."""

    def __init__(
        self, endpoint: Endpoint[P, R], identity: A, combine: Callable[[A, R], A]
    ) -> None:
        if not callable(getattr(endpoint, "stream", None)):
            raise TypeError(
                f"Accumulator needs an endpoint of an actor mesh (mesh.method), not "
                f"{type(endpoint).__name__}."
            )
        self._endpoint = endpoint
        self._identity = identity
        self._combine = combine

    def __repr__(self) -> str:
        # torchmonarch keeps object's repr; its Accumulator class lives at this path there.
        return f"<monarch._src.actor.actor_mesh.Accumulator object at {id(self):#x}>"

    def accumulate(self, *args: P.args, **kwargs: P.kwargs) -> Future[A]:
        """Call the endpoint on every actor; fold the replies, in arrival order, into one value."""
        futures = list(self._endpoint.stream(*args, **kwargs))
        if not futures:
            return Future.from_value(self._identity)

        def fold(_: Any) -> A:
            acc = self._identity
            for fut in futures:  # the stream's k-th future is the k-th reply to arrive
                acc = self._combine(acc, fut.outcome())
            return acc

        # Stream futures complete in order, so the last one completing means all did; its
        # error, if it failed, is the one its own readers see.
        return futures[-1].map(fold)
