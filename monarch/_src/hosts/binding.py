"""`spawn_procs(proc_bind=...)`: pinning each proc of a host to CPUs.

Each entry of `proc_bind` (one per proc of a host, in rank order) maps Monarch's binding keys to
values: `cpus` / `physcpubind` a CPU list such as "0-3,8", `cpunodebind` a list of NUMA nodes
whose CPUs the proc may use. Keys combine by intersection. The proc applies the result with
`sched_setaffinity` before anything else runs in it, so threads it starts inherit it.

`membind` (a NUMA memory policy) is refused: Python has no portable way to set one. Binding the
CPUs to a node with `cpunodebind` gets first-touch allocations on that node's memory.
"""

from __future__ import annotations

import os

__all__ = ["cpus_for_binding", "parse_cpu_list"]

_NODE_CPULIST = "/sys/devices/system/node/node{}/cpulist"
_CPU_KEYS = ("cpus", "physcpubind")
_KNOWN = ("cpunodebind", "membind", "physcpubind", "cpus")


def parse_cpu_list(text: str, what: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8}; ValueError naming `what` for anything else."""
    found: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            raise ValueError(
                f"{what}: {text!r} is not a list such as '0-3,8'."
            ) from None
        if first < 0 or last < first:
            raise ValueError(f"{what}: {part!r} in {text!r} is not a valid range.")
        found.update(range(first, last + 1))
    if not found:
        raise ValueError(f"{what}: {text!r} names nothing.")
    return found


def _node_cpus(node: int) -> set[int]:
    try:
        with open(_NODE_CPULIST.format(node)) as handle:
            return parse_cpu_list(handle.read(), f"NUMA node {node}")
    except OSError:
        raise ValueError(
            f"proc_bind cpunodebind: NUMA node {node} does not exist on this host "
            f"({_NODE_CPULIST.format(node)} is missing)."
        ) from None


def cpus_for_binding(binding: dict[str, str], rank: int) -> list[int]:
    """The CPUs the proc of `rank` may run on, from its `proc_bind` entry."""
    if not isinstance(binding, dict):
        raise TypeError(
            f"spawn_procs proc_bind[{rank}] must be a dict such as {{'cpus': '0-3'}}, got "
            f"{type(binding).__name__}."
        )
    unknown = sorted(set(binding) - set(_KNOWN))
    if unknown:
        raise ValueError(
            f"spawn_procs proc_bind[{rank}] has unknown keys {unknown}; the keys are "
            f"{', '.join(_KNOWN)}."
        )
    if "membind" in binding:
        raise ValueError(
            f"spawn_procs proc_bind[{rank}]: 'membind' (a NUMA memory policy) is not supported "
            "here. Bind the proc's CPUs to the node with 'cpunodebind' instead; its memory is "
            "then allocated on that node first."
        )
    allowed = set(os.sched_getaffinity(0))
    cpus = set(allowed)
    for key in _CPU_KEYS:
        if key in binding:
            wanted = parse_cpu_list(binding[key], f"spawn_procs proc_bind[{rank}][{key!r}]")
            missing = wanted - allowed
            if missing:
                raise ValueError(
                    f"spawn_procs proc_bind[{rank}][{key!r}] names CPUs {_format(missing)}, "
                    f"which this process may not use (allowed here: {_format(allowed)})."
                )
            cpus &= wanted
    if "cpunodebind" in binding:
        nodes = parse_cpu_list(binding["cpunodebind"], f"spawn_procs proc_bind[{rank}]"
                                                       "['cpunodebind']")
        cpus &= set().union(*(_node_cpus(node) for node in sorted(nodes)))
    if not cpus:
        raise ValueError(
            f"spawn_procs proc_bind[{rank}] {binding!r} leaves no CPU this process may use "
            f"(allowed here: {_format(allowed)})."
        )
    return sorted(cpus)


def _format(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))
