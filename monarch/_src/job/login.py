"""`LoginJob`: a job over hosts the user logs in to and starts workers on.

A subclass says how to start one host's worker (`_start_host(host) -> ProcessState`: the local
pid of what it started, for example an `ssh` client, and the worker's channel address); the job
starts one per host of each mesh at apply and attaches to them (`attach_to_workers`). It counts
as running while every pid it started is alive. This is torchmonarch's `LoginJob` (and its
`ProcessState`), under the same path `monarch._src.job.job`.
"""

from __future__ import annotations

import abc
import os
from typing import NamedTuple

from monarch._src.job.job import JobTrait
from monarch._src.job.state import JobState

__all__ = ["LoginJob", "ProcessState"]


class ProcessState(NamedTuple):
    """What `_start_host` started: a local pid to watch and the worker's channel address."""

    pid: int
    channel: str


class LoginJob(JobTrait):
    """Hosts named explicitly per mesh (`add_mesh(name, hosts)`), a worker started on each by
    the subclass's `_start_host`."""

    def __init__(self) -> None:
        super().__init__()
        self._meshes: dict[str, list[str]] = {}  # mesh name -> its hosts, in rank order
        self._host_to_pid: dict[str, ProcessState] = {}  # filled at apply, one per host

    def add_mesh(self, name: str, hosts: list[str]) -> None:
        """Declare mesh `name` over `hosts` (before the job is applied)."""
        self._meshes[name] = list(hosts)

    @abc.abstractmethod
    def _start_host(self, host: str) -> ProcessState:
        """Start the worker of `host`; return what to watch and where it listens."""

    def _create(self, client_script: str | None) -> None:
        if client_script is not None:
            raise RuntimeError(
                "LoginJob cannot run batch-mode scripts; call job.state() from your client."
            )
        for hosts in self._meshes.values():
            for host in hosts:
                self._host_to_pid[host] = self._start_host(host)

    def _state(self) -> JobState:
        from monarch._src.hosts.remote import attach_to_workers

        if not self._pids_active():
            raise RuntimeError(
                "A worker process of this LoginJob has exited. Apply the job again to restart it."
            )
        return JobState({
            name: attach_to_workers(
                name=name,
                ca="trust_all_connections",
                workers=[self._host_to_pid[h].channel for h in hosts],
            )
            for name, hosts in self._meshes.items()
        })

    def can_run(self, spec: JobTrait) -> bool:
        return (
            isinstance(spec, LoginJob)
            and spec._meshes == self._meshes
            and self._pids_active()
        )

    def _pids_active(self) -> bool:
        if not self.active:
            return False
        for state in self._host_to_pid.values():
            try:
                os.kill(state.pid, 0)
            except OSError:
                return False
        return True

    def _kill(self) -> None:
        for state in self._host_to_pid.values():
            try:
                os.kill(state.pid, 15)
            except OSError:
                pass  # already gone: nothing to stop
