"""Remote functions every mesh can run: logging (`monarch.builtins.log`) and random number
generation (`monarch.builtins.random`); see `monarch._src.tensor.builtins`."""

from monarch.builtins.log import log_remote, set_logging_level_remote

__all__ = ["log_remote", "set_logging_level_remote"]
