"""torchmonarch's `monarch._src.actor.endpoint`: endpoints and the `@endpoint` decorator."""

import monarch.actor  # noqa: F401  (the facade's import-time effects, as on Monarch)
from monarch._src.mesh.actor import EndpointProperty, endpoint
from monarch._src.mesh.endpoint import Endpoint, NotAnEndpoint

__all__ = ["Endpoint", "EndpointProperty", "NotAnEndpoint", "endpoint"]
