"""torchmonarch's `monarch.simulator.profiling`: the time of one operator call, measured on a
GPU (`profile_function`) or estimated from a device profile (`estimate_function_us`). See
`monarch._src.simulator.profiling`."""

from monarch._src.simulator.profiling import (
    estimate_function_us,
    expand_func_path,
    profile_function,
    resolve_function,
)

__all__ = ["estimate_function_us", "expand_func_path", "profile_function", "resolve_function"]
