"""`DaskJob`: the hosts of a Dask cluster as a job.

Any Dask cluster manager works (LocalCluster, dask-jobqueue's SLURMCluster/PBSCluster,
dask-kubernetes, a dask-gateway cluster: anything with a `scheduler_address`), as do a
`distributed.Client` or a plain scheduler address. The cluster stays the user's: `kill()` shuts
down the monarch host agents on its workers, never the cluster itself. Hosts are machines, as
`hosts_from_dask` counts them (workers sharing an address are one host).

This module and `monarch._src.hosts` are the places outside the transport that use Dask's
client API (to wait for workers); imports are lazy.
"""

from __future__ import annotations

import time
from typing import Any

from monarch._src.job.blocking import wait_for
from monarch._src.job.job import JobTrait
from monarch._src.job.local import check_client_script, launch_batch_client
from monarch._src.job.process import check_meshes
from monarch._src.job.state import JobState
from monarch._src.lowlevel import Progress

__all__ = ["DaskJob", "scheduler_address"]

# Bound on waiting for the cluster's workers to join.
_WORKER_TIMEOUT = 120.0


def scheduler_address(target: Any) -> str:
    """The scheduler address of a cluster manager, a `distributed.Client` or an address."""
    if isinstance(target, str):
        if "://" not in target:
            raise ValueError(
                f"DaskJob got {target!r}, which is not a scheduler address. Pass one like "
                "'tcp://10.0.0.1:8786', a Dask cluster manager, or a distributed.Client."
            )
        return target
    address = getattr(target, "scheduler_address", None)
    if isinstance(address, str):
        return address
    scheduler = getattr(target, "scheduler", None)
    address = getattr(scheduler, "address", None)
    if isinstance(address, str):
        return address
    raise TypeError(
        f"DaskJob cannot find a scheduler address on {type(target).__name__}. Pass a Dask "
        "cluster manager (LocalCluster, SLURMCluster, KubeCluster, a gateway cluster), a "
        "distributed.Client, or an address string."
    )


def _machines(address: str, timeout: float) -> int:
    from distributed import Client

    with Client(address, timeout=timeout, set_as_default=False) as client:  # type: ignore[no-untyped-call]
        workers = client.scheduler_info(n_workers=-1)["workers"]
    return len({w.get("host") or addr.rsplit(":", 1)[0] for addr, w in workers.items()})


class DaskJob(JobTrait):
    """Hosts from a Dask cluster: `DaskJob(SLURMCluster(...), meshes={"trainers": 4})`.

    `meshes` maps names to host counts; the cluster's machines are handed out in order. Without
    it there is one mesh, "hosts", of every machine. `apply()` scales a cluster manager up to
    the number of machines needed (when it can scale) and waits for them to join.
    """

    _live_cluster: Any

    def __init__(self, cluster_or_address: Any, meshes: dict[str, int] | None = None,
                 name: str | None = None) -> None:
        super().__init__()
        self._address = scheduler_address(cluster_or_address)
        self._meshes = check_meshes("DaskJob", meshes) if meshes is not None else None
        self._name = name or "dask"
        self.batch_pid: int | None = None  # the batch client's supervisor, in batch mode
        self._init_live()
        if not isinstance(cluster_or_address, str):
            self._live_cluster = cluster_or_address

    def _init_live(self) -> None:
        self._live_cluster = None  # the cluster manager given (not after unpickling)
        self._live_hosts: Any = None  # the HostMesh of all machines, attached in this process

    @property
    def address(self) -> str:
        """The Dask scheduler's address."""
        return self._address

    def can_run(self, spec: JobTrait) -> bool:
        """True for a spec with the same scheduler and meshes while the scheduler answers."""
        if not (isinstance(spec, DaskJob) and spec._address == self._address
                and spec._meshes == self._meshes):
            return False
        try:
            _machines(self._address, timeout=5.0)
        except OSError:
            return False
        return True

    def _create(self, client_script: str | None) -> None:
        if client_script is not None:
            check_client_script(client_script)
        needed = sum(self._meshes.values()) if self._meshes else 1
        cluster = self._live_cluster
        if cluster is not None and hasattr(cluster, "scale"):
            try:
                have = len(getattr(cluster, "workers", {}) or {})
            except TypeError:
                have = 0
            if have < needed:
                cluster.scale(needed)
        deadline = time.monotonic() + _WORKER_TIMEOUT
        with Progress(f"waiting for Dask hosts at {self._address}", needed) as progress:
            while (have := _machines(self._address, timeout=30.0)) < needed:
                progress.update(have)
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"DaskJob needs {needed} machines but the scheduler at {self._address} "
                        f"had {have} after {_WORKER_TIMEOUT:.0f}s. Scale the cluster up or ask "
                        "for fewer hosts."
                    )
                time.sleep(0.5)
            progress.close(detail="Dask hosts joined")
        if client_script is not None:
            self.batch_pid = launch_batch_client(self, client_script, supervise=True)

    def _all_hosts(self) -> Any:
        if self._live_hosts is None:
            from monarch._src.hosts.remote import hosts_from_dask

            target = self._live_cluster if self._live_cluster is not None else self._address
            self._live_hosts = hosts_from_dask(target, name=self._name)
        return self._live_hosts

    def _state(self) -> JobState:
        hosts = self._all_hosts()
        if self._meshes is None:
            return JobState({"hosts": hosts})
        total = len(hosts)
        needed = sum(self._meshes.values())
        if needed > total:
            raise RuntimeError(
                f"DaskJob meshes {self._meshes} need {needed} hosts but the cluster at "
                f"{self._address} has {total} machines. Scale the cluster up."
            )
        label = next(iter(hosts.sizes))
        out: dict[str, Any] = {}
        start = 0
        for name, count in self._meshes.items():
            out[name] = hosts.slice(**{label: slice(start, start + count)})
            start += count
        return JobState(out)

    def _kill(self) -> None:
        if self._live_hosts is not None:
            try:
                wait_for(self._live_hosts.shutdown(), 30.0)
            finally:
                self._live_hosts = None
