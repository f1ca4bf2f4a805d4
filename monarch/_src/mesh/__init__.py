"""The meshes layer: actors, endpoints, proc/host/actor meshes, the proc agent.

Importing the layer registers the proc agent's and the controller registry's control operations
with every runtime started afterwards (`runtime.on_start`).
"""

from monarch._src.mesh import (
    agent as _agent,  # noqa: F401
    controller as _controller,  # noqa: F401
)
