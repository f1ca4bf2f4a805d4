"""`RemoteException`: a worker's error, raised on the controller."""

from monarch._src.tensor.errors import RemoteException

__all__ = ["RemoteException"]
