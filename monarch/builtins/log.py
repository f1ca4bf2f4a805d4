"""`log_remote` and `set_logging_level_remote` (see `monarch._src.tensor.builtins`)."""

from monarch._src.tensor.builtins import log_remote, logger, set_logging_level_remote

__all__ = ["log_remote", "logger", "set_logging_level_remote"]
