"""torchmonarch's `monarch_extension.panic`: a function that fails the way a Rust panic does.

A panic in Monarch's extension reaches Python as pyo3's `PanicException`, a `BaseException`:
`except Exception` does not catch it, so an actor whose endpoint calls this fails (its owner is
told) instead of answering the call with an error, which is what tests of that path rely on.
"""

__all__ = ["PanicException", "panicking_function"]


class PanicException(BaseException):
    """What a panic raises: a `BaseException`, so `except Exception` does not catch it."""


def panicking_function() -> None:
    """Raise `PanicException`, as Monarch's Rust `panicking_function` panics."""
    raise PanicException("panic from panicking_function")
