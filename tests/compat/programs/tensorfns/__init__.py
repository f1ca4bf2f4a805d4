"""Remote functions for the tensor-engine compatibility programs (importable on the workers,
as Monarch's guide asks: `@remote` functions live in an importable module)."""

from monarch import remote


@remote(propagate=lambda x: x)
def add_one(x):
    return x + 1


@remote(propagate=lambda x: x)
def explode(x):
    raise ValueError("exploded on purpose")


def _times_three(x):
    return x * 3


times_three = remote("tensorfns._times_three", propagate=lambda x: x)


@remote(propagate=lambda: None)
def world_size():
    import os

    return os.environ.get("WORLD_SIZE", "?")


def _fail(x):
    raise ValueError("argument computation failed")


fail = remote("tensorfns._fail", propagate=lambda x: x)
