"""Telemetry records: what every process of a job writes into its host's collector.

`record` is the producer side (stdlib and msgpack only, so any process can load it cheaply):
the row schemas, the stable ids, and the per-process sink that batches rows to the host-local
collector's Unix socket. The collector, the SQL engine and the query API live in the job feature
(`monarch._src.job.telemetry_*`).
"""
