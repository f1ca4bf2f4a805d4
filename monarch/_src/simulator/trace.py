"""Outputs of a simulation: Chrome trace-event JSON, the memory timeline, and an HTML view.

The trace follows the Trace Event Format that Perfetto and chrome://tracing load: complete
events (`"ph": "X"`, microseconds) for tasks, counter events (`"ph": "C"`, category `memory`,
MB) for memory, and metadata events naming processes and threads. pid 0 is the controller;
worker rank r is pid r + 1 (with grouping, one pid per group of identical workers), and each
stream is a thread named after it. The HTML view is a self-contained page with inline SVG (no
scripts, no network) showing one lane per worker stream and the memory curve.
"""

from __future__ import annotations

import html
import json
from typing import Any

from monarch._src.simulator.model import Task, WorkerModel
from monarch._src.simulator.session import Session

__all__ = [
    "chrome_trace", "group_workers", "memory_snapshot", "memory_timeline", "timeline_html",
]

_US = 1e6


def group_workers(workers: list[WorkerModel]) -> list[list[int]]:
    """Ranks grouped by identical simulated behaviour (same tasks at the same times, same
    memory curve); each group's first rank represents it."""
    groups: dict[Any, list[int]] = {}
    for w in workers:
        key = (
            tuple((t.stream, t.name, round(t.start, 12), round(t.end, 12)) for t in w.tasks),
            tuple((round(e.time, 12), e.stream, e.delta) for e in w.memory),
        )
        groups.setdefault(key, []).append(w.rank)
    return list(groups.values())


def _ranks_label(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"worker {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"workers {ranks[0]}-{ranks[-1]} ({len(ranks)} identical)"
    return f"workers {','.join(map(str, ranks))} ({len(ranks)} identical)"


def chrome_trace(
    session: Session, mode: str = "everything", grouped: bool = False
) -> dict[str, Any]:
    """The trace as a JSON-ready dict. `mode`: "controller_trace_only", "stream_only" (worker
    streams and memory) or "everything"."""
    session.drain()
    events: list[dict[str, Any]] = []
    if mode in ("controller_trace_only", "everything"):
        events.append({"ph": "M", "name": "process_name", "pid": 0, "tid": 0,
                       "args": {"name": "controller"}})
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 0,
                       "args": {"name": "controller"}})
        for ev in session.controller:
            events.append({"ph": "X", "cat": "controller", "name": ev.name, "pid": 0, "tid": 0,
                           "ts": ev.start * _US, "dur": max(ev.end - ev.start, 0.0) * _US,
                           "args": ev.args})
    if mode in ("stream_only", "everything"):
        workers = session.model.workers
        groups = group_workers(workers) if grouped else [[w.rank] for w in workers]
        for ranks in groups:
            w = workers[ranks[0]]
            pid = w.rank + 1
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": _ranks_label(ranks)}})
            tids = _stream_ids(w)
            for stream, tid in tids.items():
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                               "args": {"name": stream}})
            for t in w.tasks:
                events.append(_task_event(t, pid, tids[t.stream]))
            for e in w.memory:
                events.append({"ph": "C", "cat": "memory", "name": "memory", "pid": pid,
                               "ts": e.time * _US, "args": {"allocated (MB)": e.live / 1e6}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _stream_ids(w: WorkerModel) -> dict[str, int]:
    tids: dict[str, int] = {}
    for t in w.tasks:
        tids.setdefault(t.stream, len(tids) + 1)
    for e in w.memory:
        tids.setdefault(e.stream, len(tids) + 1)
    return tids


def _task_event(t: Task, pid: int, tid: int) -> dict[str, Any]:
    args: dict[str, Any] = {"seq": t.seq}
    if t.flops:
        args["flops"] = t.flops
    if t.bytes:
        args["bytes"] = t.bytes
    if t.tag is not None:
        args["meta"] = str(t.tag)
    name = t.name if t.tag is None else f"{t.tag}: {t.name}"
    cat = "compute" if t.category == "compute" else t.category
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
            "ts": t.start * _US, "dur": (t.end - t.start) * _US, "args": args}


def write_trace(session: Session, path: str, mode: str, grouped: bool) -> None:
    """Write the Chrome trace JSON to `path`."""
    with open(path, "w") as f:
        json.dump(chrome_trace(session, mode, grouped), f)


def memory_timeline(session: Session) -> list[dict[str, Any]]:
    """Every allocation and free, in order per worker: time (s), rank, stream, delta bytes,
    bytes live on the worker and on the stream afterwards."""
    session.drain()
    out = []
    for w in session.model.workers:
        for e in w.memory:
            out.append({"time": e.time, "rank": e.rank, "stream": e.stream, "delta": e.delta,
                        "live": e.live, "stream_live": e.stream_live})
    return out


def memory_snapshot(session: Session) -> dict[str, Any]:
    """The memory timeline in the format of `torch.cuda.memory._snapshot()`, one device per
    worker, so `python -m torch.cuda._memory_viz trace_plot FILE -o out.html` can plot it.
    Addresses are made up (storages are laid out one after another per worker)."""
    session.drain()
    traces: list[list[dict[str, Any]]] = []
    segments = []
    for w in session.model.workers:
        addrs: dict[int, int] = {}
        next_addr = 0x10000000
        events: list[dict[str, Any]] = []
        streams: dict[str, int] = {}
        for e in w.memory:
            stream = streams.setdefault(e.stream, len(streams))
            common = {"size": abs(e.delta), "stream": stream, "frames": [],
                      "time_us": int(e.time * _US)}
            if e.delta >= 0:
                addrs[e.storage] = next_addr
                next_addr += max(e.delta, 1)
                events.append({"action": "alloc", "addr": addrs[e.storage], **common})
            else:
                addr = addrs.get(e.storage, 0)
                events.append({"action": "free_requested", "addr": addr, **common})
                events.append({"action": "free_completed", "addr": addr, **common})
        traces.append(events)
        segments.append({"device": w.rank, "address": 0x10000000,
                         "total_size": next_addr - 0x10000000, "stream": 0, "blocks": []})
    return {"device_traces": traces, "segments": segments}


_COLORS = {"compute": "#4e79a7", "cpu": "#9c755f", "collective": "#e15759", "transfer": "#f28e2b",
           "remote": "#76b7b2", "actor": "#59a14f"}


def timeline_html(session: Session, grouped: bool = True, width: int = 900) -> str:
    """A self-contained HTML page (inline SVG, no scripts) of the simulated timeline."""
    session.drain()
    workers = session.model.workers
    groups = group_workers(workers) if grouped else [[w.rank] for w in workers]
    end = max(session.total_time(), 1e-9)
    lanes: list[tuple[str, list[Task]]] = []
    for ranks in groups:
        w = workers[ranks[0]]
        for stream in _stream_ids(w):
            lanes.append((f"{_ranks_label(ranks)} / {stream}",
                          [t for t in w.tasks if t.stream == stream]))
    label_w, lane_h, mem_h = 230, 18, 80
    plot_w = width - label_w - 10
    height = 30 + lane_h * len(lanes) + mem_h + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="11">']
    parts.append(f'<text x="4" y="14">simulated time: {end * 1e3:.3f} ms</text>')
    for i, (label, tasks) in enumerate(lanes):
        y = 24 + i * lane_h
        parts.append(f'<text x="4" y="{y + 12}">{html.escape(label)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="{lane_h - 2}" '
                     'fill="#f4f4f4"/>')
        for t in tasks:
            x = label_w + plot_w * t.start / end
            w_ = max(plot_w * (t.end - t.start) / end, 0.5)
            color = _COLORS.get(t.category, "#999")
            title = html.escape(f"{t.name} {(t.end - t.start) * 1e6:.1f} us")
            parts.append(f'<rect x="{x:.2f}" y="{y}" width="{w_:.2f}" height="{lane_h - 2}" '
                         f'fill="{color}"><title>{title}</title></rect>')
    y0 = 30 + lane_h * len(lanes)
    w0 = workers[0]
    peak = max((e.live for e in w0.memory), default=0)
    parts.append(f'<text x="4" y="{y0 + 12}">memory, worker 0 (peak {peak / 1e6:.3f} MB)'
                 '</text>')
    if peak > 0:
        pts, last = [], 0
        for e in w0.memory:
            x = label_w + plot_w * e.time / end
            pts.append(f"{x:.2f},{y0 + mem_h - mem_h * last / peak:.2f}")
            pts.append(f"{x:.2f},{y0 + mem_h - mem_h * e.live / peak:.2f}")
            last = e.live
        pts.append(f"{label_w + plot_w:.2f},{y0 + mem_h - mem_h * last / peak:.2f}")
        parts.append(f'<polyline fill="none" stroke="#b07aa1" points="{" ".join(pts)}"/>')
    parts.append("</svg>")
    return "<div>" + "".join(parts) + "</div>"
