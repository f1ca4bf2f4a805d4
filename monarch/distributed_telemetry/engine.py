"""`QueryEngine`: DataFusion SQL over the collectors behind a query-root `TelemetryActor`."""

from monarch._src.job.telemetry_query import QueryEngine

__all__ = ["QueryEngine"]
