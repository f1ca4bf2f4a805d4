"""SQL over a job's telemetry (torchmonarch's `monarch.distributed_telemetry`).

`job.enable_telemetry(TelemetryConfig())` then `state.query_engine_client.query(sql)`; or, with
a query-root `TelemetryActor` mesh at hand, `engine.QueryEngine(actor).query(sql)` (a pyarrow
table). See `monarch._src.job.telemetry_config`.
"""

from monarch.distributed_telemetry import engine

__all__ = ["engine"]
