"""Hang triage: why is the mesh not making progress? One call gathers every rank's stack and
calls in flight, groups the ranks whose stacks match, and names the outliers:
"30 ranks of trainer in `all_reduce`; rank 17 of trainer in `load_batch` for 212 s".

`triage()` runs in the root client. It asks every proc (in parallel, bounded) for its actors'
Python frames and in-flight calls (`introspect.py`). For each actor rank the *signature* is
the chain of its thread's frames outside monarch and the standard library's asyncio/threading
machinery (the user's code, from the endpoint down), as (file, function) pairs: ranks stuck in
the same place share it whatever the line of a loop they are on. An actor with no user frame
is idle, or awaits in an async endpoint (then the endpoint in flight names it). Within each
actor mesh the largest group is the consensus; every other group is an outlier, reported with
its ranks, innermost function and the age of its oldest call. Procs that do not answer in time
are listed apart (a proc hung in native code with the GIL held cannot answer: py-spy can still
read it, `py_spy=True`).

The result is a JSON-ready dict (`summary`, `lines`, `meshes` with their `groups`,
`unreachable`, `failed`), served at `/v1/why`, printed by `monarch why` and `%mesh_why`.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from typing import Any

__all__ = ["format_triage", "triage"]

_ASK_TIMEOUT = 5.0  # seconds each proc has to answer
_SHOWN_FRAMES = 12  # innermost frames of a group's stack kept in the result
_MONARCH_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MACHINERY = ("asyncio", "threading.py", "concurrent", "selectors.py", "contextlib.py")


def _is_user(frame: dict[str, Any]) -> bool:
    path = str(frame["file"])
    if path.startswith(_MONARCH_DIR + os.sep):
        return False
    parts = path.replace("\\", "/").split("/")
    return not any(m in parts or parts[-1] == m for m in _MACHINERY)


def _signature(frames: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(f["file"]), str(f["function"])) for f in frames if _is_user(f))


def _ask_all(procs: list[Any], topo: Any) -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, max(1, len(procs)))) as pool:
        list(pool.map(lambda p: topo.ask(p, frames=True), procs))


def triage(*, py_spy: bool = False, timeout: float = _ASK_TIMEOUT) -> dict[str, Any]:
    """Stacks and in-flight calls of every actor rank of this client, grouped (module
    docstring). `py_spy`: add py-spy's dump of each outlier's and unreachable proc."""
    from monarch._src.admin.nodes import Topology, actor_state

    topo = Topology(timeout)
    procs = [p for p in topo.procs.values() if p is not topo.client]  # the client's actors are
    # the runtime's own (controllers), never what a user waits on
    _ask_all(procs, topo)
    now = time.time()
    by_mesh: dict[str, list[dict[str, Any]]] = {}
    unreachable: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for proc in procs:
        if proc.answer is None:
            unreachable.append({"proc": proc.ref, "mesh": proc.mesh, "rank": proc.rank,
                                "pid": proc.pid, "state": proc.state, "reason": proc.error,
                                "actors": [f"{a.name}[{a.rank}]" for a in proc.actors.values()]})
        for actor in proc.actors.values():
            state = actor_state(actor)
            info = actor.info or {}
            calls = list(info.get("in_flight", []))
            oldest = min((float(c["since"]) for c in calls), default=None)
            rank = {"rank": actor.rank, "proc": proc.ref, "pid": proc.pid, "state": state,
                    "address": proc.address,
                    "in_flight": [{"method": c["method"],
                                   "age_s": round(now - float(c["since"]), 1)} for c in calls],
                    "age_s": None if oldest is None else round(now - oldest, 1),
                    "frames": info.get("frames", [])}
            if state == "failed":
                failed.append({"mesh": actor.name, "rank": actor.rank,
                               "report": actor.report or str(info.get("failure") or "")})
            if state in ("failed", "stopped") or actor.info is None:
                continue
            by_mesh.setdefault(actor.name, []).append(rank)
    meshes = [_group(name, ranks) for name, ranks in sorted(by_mesh.items())]
    if py_spy:
        _add_py_spy(meshes, unreachable)
    lines = [line for m in meshes for line in m["lines"]]
    lines += [f"rank {u['rank']} of proc mesh {u['mesh']} did not answer ({u['reason']}): "
              "it may be hung in native code; py_spy=True (monarch why --py-spy) reads it "
              "anyway" for u in unreachable if u["state"] not in ("failed", "stopped")]
    lines += [f"rank {f['rank']} of {f['mesh']} failed: {_first_line(f['report'])}"
              for f in failed]
    return {"time": now, "summary": "; ".join(m["summary"] for m in meshes if m["summary"])
            or ("no actor is running a call" if not unreachable else "some procs do not answer"),
            "lines": lines, "meshes": meshes, "unreachable": unreachable, "failed": failed}


def _group(name: str, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in ranks:
        sig = _signature(r["frames"])
        methods = tuple(sorted({c["method"] for c in r["in_flight"]}))
        key: Any = ("stack", sig) if sig else ("await", methods) if methods else ("idle",)
        groups.setdefault(key, []).append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(r["rank"] for r in kv[1])))
    out: list[dict[str, Any]] = []
    for i, (key, members) in enumerate(ordered):
        members.sort(key=lambda r: r["rank"])
        ages = [r["age_s"] for r in members if r["age_s"] is not None]
        user = [f for f in members[0]["frames"] if _is_user(f)]
        if key[0] == "stack":
            where = str(user[-1]["function"])
        elif key[0] == "await":
            where = f"{', '.join(key[1])} (awaiting)"
        else:
            where = "idle"
        out.append({
            "where": where, "kind": key[0], "count": len(members),
            "ranks": [r["rank"] for r in members], "outlier": i > 0 and len(ordered) > 1,
            "max_age_s": max(ages) if ages else None,
            "methods": sorted({c["method"] for r in members for c in r["in_flight"]}),
            "stack": [f"{f['file']}:{f['line']} in {f['function']}: {f['code']}".rstrip(": ")
                      for f in user[-_SHOWN_FRAMES:]],
            "procs": [r["proc"] for r in members], "pids": [r["pid"] for r in members],
            "addresses": [r["address"] for r in members],
        })
    lines = [_describe(name, g) for g in out]
    busy = [g for g in out if g["kind"] != "idle"]
    summary = "; ".join(_describe(name, g) for g in out) if busy else ""
    return {"mesh": name, "ranks": len(ranks), "groups": out, "lines": lines,
            "summary": summary}


def _describe(mesh: str, group: dict[str, Any]) -> str:
    ranks = group["ranks"]
    who = f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks"
    if group["kind"] == "idle":
        return f"{who} of {mesh} idle"
    age = group["max_age_s"]
    since = f" for {age:.0f} s" if age is not None else ""
    listed = "" if len(ranks) == 1 or not group["outlier"] else f" ({_ranges(ranks)})"
    return f"{who}{listed} of {mesh} in `{group['where']}`{since}"


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> "ranks 0-2, 5"."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs]
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no report)"


def _add_py_spy(meshes: list[dict[str, Any]], unreachable: list[dict[str, Any]]) -> None:
    """py-spy's dump (text) of each outlier group's first proc and of each unreachable proc."""
    from monarch._src.admin.stacks import _py_spy, dump_stacks

    for mesh in meshes:
        for group in mesh["groups"]:
            if group["outlier"] and group["addresses"]:
                try:
                    dump = dump_stacks(group["addresses"][0], py_spy=True, timeout=_ASK_TIMEOUT)
                    group["py_spy"] = dump.py_spy or f"(py-spy: {dump.py_spy_note})"
                except (TimeoutError, RuntimeError) as exc:
                    group["py_spy"] = f"(py-spy: {exc})"
    for u in unreachable:
        pid = u.get("pid")
        if pid and u["state"] not in ("failed", "stopped"):
            spy, note = _py_spy(int(pid))  # from here: the proc itself cannot answer
            u["py_spy"] = spy or f"(py-spy: {note})"


def format_triage(result: dict[str, Any], stacks: bool = True) -> str:
    """The triage as text for a terminal or a notebook cell."""
    out = [f"monarch why: {result['summary']}", ""]
    for mesh in result["meshes"]:
        out.append(f"actor mesh {mesh['mesh']} ({mesh['ranks']} ranks)")
        for group in mesh["groups"]:
            mark = "!" if group["outlier"] else "*"
            out.append(f"  {mark} {_describe(mesh['mesh'], group)}  [{_ranges(group['ranks'])}]")
            if group["methods"]:
                out.append(f"      in flight: {', '.join(group['methods'])}")
            if stacks and group["stack"]:
                out.extend(f"      {line}" for line in group["stack"])
            if group.get("py_spy"):
                out.extend(f"      | {line}" for line in str(group["py_spy"]).splitlines())
        out.append("")
    for u in result["unreachable"]:
        out.append(f"proc {u['proc']} ({u['state']}) did not answer: {u['reason']}")
        if u.get("py_spy"):
            out.extend(f"      | {line}" for line in str(u["py_spy"]).splitlines())
    for f in result["failed"]:
        out.append(f"rank {f['rank']} of {f['mesh']} failed: {_first_line(f['report'])}")
    return "\n".join(out).rstrip() + "\n"
