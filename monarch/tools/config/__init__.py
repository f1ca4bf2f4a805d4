"""monarch.tools.config: what the `monarch` tooling ships to hosts (`Workspace`)."""

from monarch.tools.config.environment import CondaEnvironment, Environment
from monarch.tools.config.scheduling import Config
from monarch.tools.config.workspace import Workspace

__all__ = ["CondaEnvironment", "Config", "Environment", "Workspace"]
