"""monarch: the Monarch single-controller programming model on Dask transport."""
