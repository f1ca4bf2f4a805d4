"""`JobState`: the host meshes of a running job, one attribute per mesh name."""

from __future__ import annotations

from typing import Any

__all__ = ["JobState"]


class JobState:
    """The host meshes of a job that is up: `state.trainers` is the `HostMesh` named "trainers".

    Built by `JobTrait.state()`; asking for a name the job does not have raises `AttributeError`
    listing the names it has (torchmonarch's wording). With `job.enable_telemetry(...)`,
    `query_engine_client` runs SQL over the job's telemetry through its HTTP API at
    `telemetry_url`; `query_engine` stays None as on torchmonarch (the engine lives behind
    the API); with `TelemetryConfig(include_dashboard=True)`, `dashboard_url` is the Monarch
    Dashboard's page on the same server (else None).
    """

    def __init__(self, hosts: dict[str, Any]) -> None:
        # Mesh name -> HostMesh; fixed once built.
        self._hosts = dict(hosts)
        self.query_engine: Any = None
        self.query_engine_client: Any = None
        self.telemetry_url: str | None = None
        self.dashboard_url: str | None = None
        self.admin_url: str | None = None

    @property
    def mesh_names(self) -> list[str]:
        """The names of the job's host meshes, in the order the job declared them."""
        return list(self._hosts)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_hosts":
            raise AttributeError(name)
        hosts = self.__dict__.get("_hosts", {})
        if name in hosts:
            return hosts[name]
        raise AttributeError(
            f"{name!r} is not a valid host mesh name. Available names: {', '.join(sorted(hosts))}"
        )

    def __repr__(self) -> str:
        return f"JobState(hosts={self._hosts!r})"
