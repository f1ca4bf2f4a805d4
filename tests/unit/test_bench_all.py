"""The benchmark runner `benchmarks/all.py` and W7's measuring helpers (`benchmarks/w7.py`,
`benchmarks/w7_sim.py`): every result file carries the load and the commit, a failing program
still gets its file, and the W7 figures come from real processes and a real (small) part (b)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"


def _bench_module(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _echo_args(tmp_path: Path) -> Path:
    """A benchmark program whose report is the arguments it was given."""
    return _script(tmp_path, "ok.py", """
        import json, sys
        print(json.dumps({"args": sys.argv[1:]}))
    """)


def test_all_writes_each_report_with_load_and_commit(tmp_path: Path, monkeypatch: Any) -> None:
    all_ = _bench_module("all")
    ok = _script(tmp_path, "ok.py", """
        import json, sys
        print("progress", file=sys.stderr)
        print(json.dumps({"figure": 1.5, "args": sys.argv[1:]}, indent=2))
    """)
    broken = _script(tmp_path, "broken.py", """
        import sys
        print("it broke", file=sys.stderr)
        sys.exit(3)
    """)
    monkeypatch.setattr(all_, "BENCHMARKS", {
        "ok": all_.Benchmark(str(ok), ("--full",), ("--smoke",), "prints a report"),
        "broken": all_.Benchmark(str(broken), (), (), "prints nothing"),
    })
    out = tmp_path / "results"
    assert all_.main(["--out", str(out), "--timeout", "60"]) == 1  # one failed

    (ok_file,) = out.glob("*-ok.json")
    record = json.loads(ok_file.read_text())
    assert ok_file.name == f"{record['started_utc'][:10]}-ok.json"
    assert record["report"] == {"figure": 1.5, "args": ["--full"]}  # indented JSON is read
    assert record["returncode"] == 0 and record["quick"] is False
    assert isinstance(record["load_avg_1m_before"], float)
    assert isinstance(record["load_avg_1m_after"], float)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert record["commit"] == head

    broken_record = json.loads(next(out.glob("*-broken.json")).read_text())
    assert broken_record["returncode"] == 3
    assert "without printing a JSON report" in broken_record["report"]["error"]
    assert "it broke" in broken_record["report"]["stderr_tail"]


def test_all_quick_passes_smoke_options_and_refuses_unknown_names(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    all_ = _bench_module("all")
    ok = _echo_args(tmp_path)
    monkeypatch.setattr(all_, "BENCHMARKS", {
        "ok": all_.Benchmark(str(ok), ("--full",), ("--smoke",), "prints a report")})
    assert all_.main(["--quick", "--out", str(tmp_path)]) == 0
    record = json.loads(next(tmp_path.glob("*-ok.json")).read_text())
    assert record["report"]["args"] == ["--smoke"] and record["quick"] is True
    with pytest.raises(SystemExit):
        all_.main(["--only", "nope"])
    assert "Unknown benchmark(s) ['nope']" in capsys.readouterr().err


def test_all_before_reaches_the_programs_that_compare(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    all_ = _bench_module("all")
    ok = _echo_args(tmp_path)
    monkeypatch.setattr(all_, "BENCHMARKS", {
        "workloads": all_.Benchmark(str(ok), ("--full",), (), "compares"),
        "other": all_.Benchmark(str(ok), ("--full",), (), "does not")})
    out = tmp_path / "out"
    assert all_.main(["--out", str(out), "--before", str(REPO)]) == 0
    compares = json.loads(next(out.glob("*-workloads.json")).read_text())["report"]["args"]
    assert compares == ["--full", "--systems", "before,ours,torchmonarch,floor",
                        "--before", str(REPO)]
    assert json.loads(next(out.glob("*-other.json")).read_text())["report"]["args"] == ["--full"]
    with pytest.raises(SystemExit):
        all_.main(["--before", str(tmp_path)])
    assert "not a checkout of this project" in capsys.readouterr().err


def test_w7_process_figures_come_from_proc(tmp_path: Path) -> None:
    w7 = _bench_module("w7")
    # The child says when its interpreter is up: just after the exec its USS is a few pages.
    # Leaving the with-block closes its stdin, which ends it, and waits for it.
    with subprocess.Popen(
            [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        assert child.pid in w7._descendants(os.getpid())
        uss = w7._uss_mib(child.pid)
        assert uss is not None and 0.1 < uss < 200
        (idle,) = w7._idle_cpu_pct([[child.pid]], 0.2)
        assert 0.0 <= idle < 50.0
    assert w7._uss_mib(child.pid) is None and w7._cpu_ticks(child.pid) is None


def test_w7_part_b_counts_what_the_controller_writes() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, str(BENCH / "w7.py"), "--part", "b", "--agents", "6", "--hosts", "2,3",
         "--per-host", "1,2", "--calls", "4"],
        cwd=BENCH, env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["agents"] == 6
    for name, ranks, hosts in (("agents6", 6, 6), ("hosts2x1", 2, 2), ("hosts2x2", 4, 2),
                               ("hosts3x1", 3, 3), ("hosts3x2", 6, 3)):
        entry = report[name]
        assert entry["ranks"] == ranks
        # One envelope per rank (flat) or per host (a cast tree), never fewer than hosts.
        assert hosts <= entry["controller_envelopes"] <= ranks
        assert entry["controller_bytes"] > 50 * entry["controller_envelopes"]
        assert entry["controller_cpu_us"] > 0 and entry["p50_ms"] > 0
    assert set(report["scaling"]) == {"H2", "H3"}
    assert report["cast"] in ("flat", "per host", "mixed")


def test_run_system_dead_unreaped_member_is_not_left_behind(tmp_path: Path) -> None:
    # The runner runs under a child subreaper, so the member a benchmark did not reap stays a
    # zombie of the runner (as under an init that reaps every second or two) until it is
    # waited for, while a member that still runs is listed and killed.
    _script(tmp_path, "zombie.py", """
        import json, os
        pid = os.fork()  # not a Popen: its __del__ would reap the child at exit
        if pid == 0:
            os._exit(0)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # it has exited, unreaped
        print(json.dumps({"figure": 1}))
    """)
    _script(tmp_path, "running.py", """
        import json, subprocess
        subprocess.Popen(["sleep", "60"])
        print(json.dumps({"figure": 2}))
    """)
    runner = _script(tmp_path, "runner.py", f"""
        import ctypes, json, os, sys
        sys.path.insert(0, {str(BENCH)!r})
        import run
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        run.GROUP_EXIT_GRACE_S = 0.2
        out = {{}}
        for name in ("zombie", "running"):
            out[name] = run.run_system([sys.executable, os.path.join({str(tmp_path)!r},
                                        name + ".py")], dict(os.environ), 60)
            out[name + "_reaped"] = []
            while True:  # the orphaned member, now the runner's child
                try:
                    _, status = os.waitpid(-1, 0)
                except ChildProcessError:
                    break
                out[name + "_reaped"].append(os.waitstatus_to_exitcode(status))
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, str(runner)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["zombie"]["figure"] == 1 and "left_processes_behind" not in out["zombie"]
    assert out["zombie_reaped"] == [0]  # it was there, dead, while the runner looked
    (left,) = out["running"]["left_processes_behind"]
    assert left.endswith(": sleep 60")
    assert out["running_reaped"] == [-9]  # killed by the runner
