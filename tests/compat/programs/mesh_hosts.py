"""Monarch's meshes page on host meshes: proc shapes are the host dims plus the per-host dims.

Follows the host-mesh material: a two-host mesh (``monarch.job.hosts_from_config``, the
documented stand-in that starts two local worker hosts), its extent and slices,
``spawn_procs(per_host={"gpus": 2})`` giving ``{hosts: 2, gpus: 2}``, ``spawn_procs()`` giving one
proc per host, spawning on a one-host slice (an int drops ``hosts``, a range keeps it), the
error for ``per_host`` labels that repeat a host label, and ``shutdown()``.
"""

from compat import check, raises

from monarch.actor import Actor, current_rank, endpoint
from monarch.job import hosts_from_config


class Where(Actor):
    @endpoint
    def rank(self) -> dict:
        return dict(current_rank())


hosts = hosts_from_config("MONARCH_HOSTS")
check("hosts extent", hosts.extent)
check("hosts sizes", hosts.sizes)
check("hosts len", len(hosts))
check("hosts repr", repr(hosts))
check("one host slice extent", hosts.slice(hosts=1).extent)
check("host range slice extent", hosts.slice(hosts=slice(0, 1)).extent)
check("hosts flatten extent", hosts.flatten("h").extent)
check("hosts rename extent", hosts.rename(hosts="nodes").extent)

procs = hosts.spawn_procs(per_host={"gpus": 2})
check("procs extent", procs.extent)
where = procs.spawn("where", Where)
check("ranks across hosts", list(where.rank.call().get().values()))
check("slice one host of the actors", list(where.slice(hosts=1).rank.call().get().values()))
check("one proc per host", hosts.spawn_procs().extent)
check("procs on one host", hosts.slice(hosts=0).spawn_procs(per_host={"gpus": 3}).extent)
first_hosts = hosts.slice(hosts=slice(0, 1))
check("procs on a host range", first_hosts.spawn_procs(per_host={"gpus": 3}).extent)
check("two per-host dims", hosts.spawn_procs(per_host={"nodes": 1, "gpus": 2}).extent)
raises("per_host repeats a host label", hosts.spawn_procs, per_host={"hosts": 2})
raises("per_host repeats among others", hosts.spawn_procs, per_host={"gpus": 2, "hosts": 1})
raises("slice unknown host dim", hosts.slice, gpus=0)
raises("slice host past the end", hosts.slice, hosts=2)
procs.stop().get()
hosts.shutdown().get()
check("shut down", "yes")
