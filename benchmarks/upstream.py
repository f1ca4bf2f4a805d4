"""Runs Monarch's own tests and examples on this implementation and on torchmonarch 0.7.0.

    python benchmarks/upstream.py [--upstream PATH] [--ref REF] [--only FILE,...]
                                  [--no-tests] [--no-examples] [--jobs N] [--out DIR] ...

(`make upstream` runs it.) Upstream's tests are the oracle of what "compatible" means, so they
run unmodified: `python/tests` (and what it reads: `python/benches`, `disabled_tests.txt`) and
the examples (`docs/source/examples`, `python/examples`) are exported from `--upstream` (a bare
git mirror, read at `--ref`, or a plain checkout; `UPSTREAM=` in the environment, default the
mirror at /work/.mirror/meta-pytorch+monarch/repo) into a temporary folder outside this
repository. Nothing is fetched and nothing of theirs is written into this checkout.

Each test file runs on its own, once per side (ours: .venv; torchmonarch: the venv
benchmarks/setup_peer.sh builds, with pytest added by `make upstream`), from the temporary
folder with `python -I` and an environment without PYTHONPATH, so each side imports its own
monarch (checked: `monarch.__file__` of each is in the report). A test has `--test-timeout`
(pytest-timeout), a file `--file-timeout` (its process group is killed), the whole run
`--total-timeout` (what has not started by then is reported as not run). Per-test outcomes come
from pytest's junit XML; where a file's pytest died before writing it, from its `-v` lines.

The report (`benchmarks/results/<UTC date>-upstream.json`, wrapped like benchmarks/all.py's,
with the load and the commit) and the printed tables give per file: the tests that pass on
both, on torchmonarch only, on ours only, on neither, or why the file was not collected (the
first line of the import error); the totals; and per example, what happened on each side.
Examples run with no GPU visible (CUDA_VISIBLE_DEVICES=""): those that need one are recorded
as `needs GPU`, not as failures of either side. The load keys are `_report`'s
(`load_avg_1m_before`/`_after`); files written before it have `load_before`/`load_after` (the
1, 5 and 15-minute averages).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import all as bench_all
import run
from _report import load_after, load_before, write_result

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_UPSTREAM = "/work/.mirror/meta-pytorch+monarch/repo"
PEER_PYTHON = HERE / ".venv-torchmonarch" / "bin" / "python"

# What is exported from upstream (those absent at --ref are left out).
TEST_PATHS = ("python/tests", "python/benches", "disabled_tests.txt")
EXAMPLE_DIRS = ("docs/source/examples", "python/examples")

# Upstream files that test Rust internals and so mean nothing for a pure-Python implementation;
# they are not run on either side and are left out of every count.
NOT_APPLICABLE: dict[str, str] = {
    "test_rust_bindings_load.py": "loads the compiled Rust extension modules (.so) themselves",
    "test_signal_safe_block_on.py": "the Rust runtime's signal-safe tokio block_on",
    "_monarch/test_waker.py": "the Rust-side waker that wakes Python from tokio",
    "test_extension_linking.py": "readelf checks of the compiled extension's DT_NEEDED entries",
    "test_rust_struct_mixins.py": "Python mixins patched onto @rust_struct classes (a Rust "
                                  "test struct)",
}

SIDES = ("ours", "torchmonarch")

# An example's output that says it stopped for want of a GPU (or its stack).
_GPU_RE = re.compile(
    r"Torch not compiled with CUDA|No CUDA GPUs|Found no NVIDIA driver|CUDA driver|"
    r"cuda is not available|CUDA is not available|nvidia-smi|NCCL|requires? (a )?GPU|"
    r"no GPUs? (available|found)|libcuda|cudaGetDeviceCount|\bcuda\b.*not available",
    re.IGNORECASE)
_VERBOSE_RE = re.compile(
    r"^(\S+\.py::\S+).*?\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.MULTILINE)
_VERBOSE_OUTCOME = {"PASSED": "passed", "XPASS": "passed", "FAILED": "failed",
                    "ERROR": "error", "SKIPPED": "skipped", "XFAIL": "skipped"}


class FileRun(NamedTuple):
    """One test file on one side: `status` is "ran", "not_collected", "crashed", "timeout" or
    "not_run"; `tests` maps test id to "passed" / "failed" / "error" / "skipped"; `reason`
    says why a file did not run through (an import error's first line, a signal, a timeout);
    `messages` holds the first line of each failed test's message."""
    status: str
    tests: dict[str, str]
    reason: str = ""
    messages: Mapping[str, str] = {}  # read only: the default is shared by every FileRun
    wall_s: float = 0.0


# ---------------------------------------------------------------------------------------------
# Pure: outcomes out of pytest's output, and the tables out of the outcomes.


def first_error_line(text: str) -> str:
    """The line that says what went wrong in a pytest error report: the first `E   ` line (an
    import error's `ModuleNotFoundError: ...`), else the last non-empty line."""
    for line in text.splitlines():
        if line.startswith("E   ") and line[4:].strip():
            return line[4:].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def parse_junit(xml_text: str, file_rel: str) -> tuple[dict[str, str], dict[str, str], str]:
    """(outcomes by test id, first message line of each failure, collection error or "") from
    the junit XML of one pytest run over `file_rel` (a path under the tests' root); test ids
    are `file_rel::Class::name`, as pytest names them."""
    root = ET.fromstring(xml_text)
    module = file_rel[:-3].replace("/", ".") if file_rel.endswith(".py") else file_rel
    tests: dict[str, str] = {}
    messages: dict[str, str] = {}
    collect_error = ""
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        name = case.get("name", "")
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if error is not None and (error.get("message") or "").startswith("collection failure"):
            collect_error = collect_error or first_error_line(error.text or "")
            continue
        cls = classname[len(module):].lstrip(".") if classname.startswith(module) else ""
        test_id = "::".join([file_rel, *cls.split(".")] if cls else [file_rel]) + f"::{name}"
        if failure is not None:
            tests[test_id] = "failed"
            node = failure
        elif error is not None:
            # An error in a fixture's teardown after a pass is still a failure of the test.
            tests[test_id] = "error"
            node = error
        elif skipped is not None:
            tests[test_id] = "skipped"
            continue
        else:
            tests[test_id] = "passed"
            continue
        message = node.get("message") or first_error_line(node.text or "")
        messages[test_id] = message.strip().splitlines()[0][:300] if message.strip() else ""
    return tests, messages, collect_error


def parse_verbose(output: str) -> dict[str, str]:
    """Outcomes from pytest `-v` lines (`path::test PASSED [ 50%]`): what is left of a run
    whose pytest was killed or died before writing its junit XML."""
    tests: dict[str, str] = {}
    for match in _VERBOSE_RE.finditer(output):
        tests.setdefault(match.group(1), _VERBOSE_OUTCOME[match.group(2)])
    return tests


def compare_file(ours: FileRun, peer: FileRun) -> dict[str, Any]:
    """One file's row: the tests passing on both / torchmonarch only / ours only / neither
    (failed, errored or skipped on each side, or absent from a side that did not collect it),
    with each side's status and, where a side did not run through, why."""
    ids = sorted(set(ours.tests) | set(peer.tests))
    rows: dict[str, list[str]] = {"both": [], "torchmonarch_only": [], "ours_only": [],
                                  "neither": []}
    for test_id in ids:
        on_ours = ours.tests.get(test_id) == "passed"
        on_peer = peer.tests.get(test_id) == "passed"
        key = ("both" if on_ours and on_peer else "torchmonarch_only" if on_peer
               else "ours_only" if on_ours else "neither")
        rows[key].append(test_id)
    return {
        **{key: len(value) for key, value in rows.items()},
        "tests": rows,
        "ours": {"status": ours.status, "reason": ours.reason, "collected": len(ours.tests),
                 "passed": sum(o == "passed" for o in ours.tests.values())},
        "torchmonarch": {"status": peer.status, "reason": peer.reason,
                         "collected": len(peer.tests),
                         "passed": sum(o == "passed" for o in peer.tests.values())},
    }


def totals(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The sums over the files, and the share of the tests passing on torchmonarch that pass on
    ours (None when none pass on torchmonarch)."""
    out: dict[str, Any] = {key: sum(row[key] for row in rows.values())
                           for key in ("both", "torchmonarch_only", "ours_only", "neither")}
    for side in SIDES:
        out[f"collected_{side}"] = sum(row[side]["collected"] for row in rows.values())
        out[f"passed_{side}"] = sum(row[side]["passed"] for row in rows.values())
        out[f"files_not_collected_{side}"] = sum(
            row[side]["status"] == "not_collected" for row in rows.values())
    passed_peer = out["both"] + out["torchmonarch_only"]
    out["share_of_torchmonarch_passes_passing_on_ours"] = (
        round(out["both"] / passed_peer, 4) if passed_peer else None)
    return out


def _side_note(side: dict[str, Any]) -> str:
    if side["status"] == "ran":
        return ""
    reason = f": {side['reason']}" if side["reason"] else ""
    return f"{side['status']}{reason}"


def format_table(rows: dict[str, dict[str, Any]], sums: dict[str, Any]) -> str:
    """The per-file table (markdown) and the totals under it."""
    lines = ["| file | both | torchmonarch only | ours only | neither | ours not run through "
             "| torchmonarch not run through |",
             "|---|---:|---:|---:|---:|---|---|"]
    for name, row in sorted(rows.items()):
        lines.append(
            f"| {name} | {row['both']} | {row['torchmonarch_only']} | {row['ours_only']} | "
            f"{row['neither']} | {_side_note(row['ours'])} | {_side_note(row['torchmonarch'])} |")
    share = sums["share_of_torchmonarch_passes_passing_on_ours"]
    lines += [
        "",
        f"collected: ours {sums['collected_ours']}, torchmonarch "
        f"{sums['collected_torchmonarch']}; passed: ours {sums['passed_ours']}, torchmonarch "
        f"{sums['passed_torchmonarch']}; both {sums['both']}, torchmonarch only "
        f"{sums['torchmonarch_only']}, ours only {sums['ours_only']}, neither {sums['neither']}",
        f"files not collected: ours {sums['files_not_collected_ours']}, torchmonarch "
        f"{sums['files_not_collected_torchmonarch']}",
        "share of the tests passing on torchmonarch that pass on ours: "
        + ("n/a" if share is None else f"{share:.1%} ({sums['both']}/"
           f"{sums['both'] + sums['torchmonarch_only']})"),
    ]
    return "\n".join(lines)


def classify_example(returncode: int | None, timed_out: bool, output: str) -> str:
    """"ok", "timeout", "needs GPU" or "failed: <its error line>"."""
    if timed_out:
        return "timeout"
    if returncode == 0:
        return "ok"
    if _GPU_RE.search(output):
        return "needs GPU"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b", line)]
    why = errors[-1] if errors else (lines[-1] if lines else f"exit {returncode}")
    return f"failed: {why[:200]}"


def format_examples(examples: dict[str, dict[str, str]]) -> str:
    lines = ["| example | ours | torchmonarch |", "|---|---|---|"]
    for name, sides in sorted(examples.items()):
        cells = [sides.get(side, "").replace("|", "\\|") for side in SIDES]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Impure: exporting upstream, running the two sides.


def _log(msg: str) -> None:
    print(f"[upstream] {msg}", file=sys.stderr, flush=True)


def export_upstream(source: Path, ref: str, dest: Path,
                    paths: Iterable[str]) -> dict[str, str]:
    """Copies `paths` of upstream (a bare git dir at `ref`, or a checkout) into `dest`; what it
    was (the source, its commit where known)."""
    paths = list(paths)
    if (source / "objects").is_dir() and (source / "HEAD").is_file():
        git = ["git", f"--git-dir={source}"]
        commit = subprocess.run([*git, "rev-parse", ref], capture_output=True, text=True,
                                check=True, timeout=60).stdout.strip()
        present = [p for p in paths if subprocess.run(
            [*git, "cat-file", "-e", f"{commit}:{p}"], capture_output=True,
            timeout=60).returncode == 0]
        archive = subprocess.Popen([*git, "archive", commit, *present], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True,
                       timeout=300)
        if archive.wait(timeout=60) != 0:
            raise RuntimeError(f"git archive of {present} at {commit} in {source} failed.")
        return {"source": str(source), "ref": ref, "commit": commit}
    if not (source / "python").is_dir():
        raise SystemExit(f"--upstream {source}: neither a bare git mirror (objects/, HEAD) nor "
                         "a checkout of Monarch (python/); give the mirror's path or a clone.")
    for rel in paths:
        src = source / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True,
                          text=True, timeout=60)
    return {"source": str(source), "ref": "working tree",
            "commit": head.stdout.strip() if head.returncode == 0 else ""}


def side_env(python: str) -> dict[str, str]:
    """The environment of a side's runs: none of ours leaks in (no PYTHONPATH, no MONARCH_*
    settings), its venv's scripts first on PATH, no GPU visible, no network wanted."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MONARCH")}
    env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def identify(python: str, cwd: Path) -> dict[str, str]:
    """Which monarch `python` imports from `cwd` (as its test runs do), and its version."""
    code = ("import sys; sys.path.insert(0, '.'); import monarch, importlib.metadata as m\n"
            "v = ''\nfor d in ('torchmonarch', 'monarch'):\n"
            "    try: v = d + ' ' + m.version(d); break\n"
            "    except Exception: pass\n"
            "print(monarch.__file__); print(v)")
    done = subprocess.run([python, "-I", "-c", code], cwd=cwd, env=side_env(python),
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"{python} cannot import monarch from {cwd}: "
                         f"{first_error_line(done.stderr) or done.stderr[-500:]}")
    path, version = [*done.stdout.splitlines(), "", ""][:2]
    return {"python": python, "monarch_file": path, "version": version}


def _run_group(argv: list[str], cwd: Path, env: dict[str, str],
               timeout: float) -> tuple[int | None, bool, str, float]:
    """(returncode, timed out, stdout+stderr, seconds) of `argv` in its own process group,
    all of which is killed at the timeout or when the command leaves procs behind; so are the
    processes it started in sessions of their own (a job's detached worker hosts, either side's
    job sidecar), found by the run's token in their environment."""
    token = uuid.uuid4().hex
    env = dict(env, UPSTREAM_RUN_TOKEN=token)
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            returncode: int | None = proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            returncode = None
        # Whatever the run left (its procs, a hung pytest) goes with it: the next run on this
        # 2-core machine must not share it with leftovers.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        _kill_detached(f"UPSTREAM_RUN_TOKEN={token}".encode())
        out.seek(0)
        return returncode, timed_out, out.read(), time.perf_counter() - t0


def _kill_detached(marker: bytes) -> None:
    """SIGKILL every process whose environment holds `marker`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if marker in environ.split(b"\0"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended by itself meanwhile


def run_test_file(python: str, tests_root: Path, file_rel: str, work: Path,
                  test_timeout: float, file_timeout: float) -> FileRun:
    junit = work / f"{file_rel.replace('/', '__')}.{Path(python).parent.parent.name}.xml"
    argv = [python, "-I", "-m", "pytest", file_rel, "--rootdir", str(tests_root),
            "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
            "-o", "asyncio_default_fixture_loop_scope=function",
            f"--timeout={test_timeout:g}", "-v", f"--junitxml={junit}"]
    returncode, timed_out, output, wall = _run_group(argv, tests_root, side_env(python),
                                                     file_timeout)
    if junit.exists() and not timed_out:
        try:
            tests, messages, collect_error = parse_junit(junit.read_text(), file_rel)
        except ET.ParseError:
            tests, messages, collect_error = parse_verbose(output), {}, ""
        if collect_error and not tests:
            return FileRun("not_collected", {}, collect_error, {}, round(wall, 1))
        return FileRun("ran", tests, collect_error, messages, round(wall, 1))
    tests = parse_verbose(output)
    if timed_out:
        return FileRun("timeout", tests, f"killed after {file_timeout:g} s", {}, round(wall, 1))
    why = f"pytest exited {returncode} without a report: {first_error_line(output)[:200]}"
    return FileRun("crashed", tests, why, {}, round(wall, 1))


def test_files(tests_root: Path, only: list[str]) -> list[str]:
    files = sorted(str(p.relative_to(tests_root)) for p in tests_root.rglob("test_*.py"))
    if only:
        files = [f for f in files if any(f == o or f.startswith(o.rstrip("/") + "/")
                                         for o in only)]
    return files


def example_files(root: Path) -> list[str]:
    found: list[str] = []
    for rel in EXAMPLE_DIRS:
        base = root / rel
        if base.is_dir():
            found += sorted(str(p.relative_to(root)) for p in base.rglob("*.py")
                            if p.name != "__init__.py" and "__pycache__" not in p.parts)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", type=Path,
                        default=Path(os.environ.get("UPSTREAM") or DEFAULT_UPSTREAM),
                        help="Monarch's bare git mirror or a checkout (env UPSTREAM)")
    parser.add_argument("--ref", default="HEAD", help="the mirror's commit to read")
    parser.add_argument("--ours", default=run._ours_python(), help="our venv's python")
    parser.add_argument("--peer", default=str(PEER_PYTHON), help="torchmonarch's venv's python")
    parser.add_argument("--only", default="", help="test files or folders under python/tests, "
                                                   "comma-separated (default: all)")
    parser.add_argument("--examples", default="",
                        help="only the examples whose path contains one of these, "
                             "comma-separated (default: all)")
    parser.add_argument("--no-tests", action="store_true")
    parser.add_argument("--no-examples", action="store_true")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (at most 2)")
    parser.add_argument("--test-timeout", type=float, default=60.0)
    parser.add_argument("--file-timeout", type=float, default=300.0)
    parser.add_argument("--example-timeout", type=float, default=120.0)
    parser.add_argument("--total-timeout", type=float, default=5400.0,
                        help="seconds for everything; what has not started by then is not run")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--label", default="",
                        help="names the result <date>-upstream-<label>.json (e.g. before)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= 2:
        parser.error("--jobs must be 1 or 2 (the machine has 2 cores, shared).")
    if not Path(args.peer).exists():
        parser.error(f"--peer {args.peer} does not exist: run `bash benchmarks/setup_peer.sh` "
                     "(or `make upstream`, which also installs pytest there).")
    pythons = {"ours": args.ours, "torchmonarch": args.peer}

    started = datetime.datetime.now(datetime.timezone.utc)
    # What ours was at the start: a run takes long enough for commits to land meanwhile.
    commit = bench_all._git("rev-parse", "HEAD")
    dirty = bool(bench_all._git("status", "--porcelain", "--untracked-files=no"))
    before_load = load_before()
    t0 = time.perf_counter()
    deadline = time.monotonic() + args.total_timeout
    tmp = Path(tempfile.mkdtemp(prefix="monarch-upstream-"))
    if tmp.resolve().is_relative_to(REPO):
        parser.error(f"the temporary folder {tmp} is inside {REPO}; set TMPDIR elsewhere.")
    try:
        source = export_upstream(args.upstream, args.ref, tmp, (*TEST_PATHS, *EXAMPLE_DIRS))
        tests_root = tmp / "python" / "tests"
        work = tmp / "_junit"
        work.mkdir()
        identities = {side: identify(py, tests_root) for side, py in pythons.items()}
        for side, ident in identities.items():
            _log(f"{side}: {ident['python']} imports {ident['monarch_file']} ({ident['version']})")
        if identities["ours"]["monarch_file"] == identities["torchmonarch"]["monarch_file"]:
            raise SystemExit("Both sides import the same monarch "
                             f"({identities['ours']['monarch_file']}): nothing to compare.")

        lock = threading.Lock()
        results: dict[tuple[str, str], FileRun] = {}
        examples: dict[str, dict[str, str]] = {}

        def one_test(file_rel: str, side: str) -> None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                result = FileRun("not_run", {}, "the run's --total-timeout was spent")
            else:
                try:
                    result = run_test_file(pythons[side], tests_root, file_rel, work,
                                           args.test_timeout, min(args.file_timeout, remaining))
                except Exception as exc:  # noqa: BLE001 - recorded; the other files still run
                    result = FileRun("crashed", {}, f"the runner failed: {exc!r}")
            with lock:
                results[file_rel, side] = result
            _log(f"{file_rel} [{side}]: {result.status} "
                 f"{sum(o == 'passed' for o in result.tests.values())}/{len(result.tests)} "
                 f"passed, {result.wall_s} s {result.reason[:100]}")

        def one_example(rel: str, side: str) -> None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome = "not run: the run's --total-timeout was spent"
            else:
                py = pythons[side]
                script = tmp / rel
                try:
                    rc, timed_out, output, _ = _run_group(
                        [py, "-s", script.name], script.parent, side_env(py),
                        min(args.example_timeout, remaining))
                    outcome = classify_example(rc, timed_out, output)
                except Exception as exc:  # noqa: BLE001 - recorded; the others still run
                    outcome = f"failed: the runner failed: {exc!r}"

            with lock:
                examples.setdefault(rel, {})[side] = outcome
            _log(f"{rel} [{side}]: {outcome}")

        files = [] if args.no_tests else [
            f for f in test_files(tests_root, [o for o in args.only.split(",") if o])
            if f not in NOT_APPLICABLE]
        # The examples first: they are few, and a run cut short by --total-timeout still has them.
        jobs: list[tuple[Any, str]] = [] if args.no_examples else [
            (one_example, e) for e in example_files(tmp)
            if not args.examples or any(w in e for w in args.examples.split(",") if w)]
        jobs += [(one_test, f) for f in files]

        def both_sides(fn: Any, name: str) -> None:
            # One side after the other: the two runs of one file or example would fight over
            # the fixed ports some of them bind (debugging.py's debugger, for one).
            for side in SIDES:
                fn(name, side)

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in [pool.submit(both_sides, fn, name) for fn, name in jobs]:
                future.result()

        rows = {f: compare_file(results[f, "ours"], results[f, "torchmonarch"]) for f in files}
        for f, row in rows.items():
            for side in SIDES:
                row[side]["messages"] = results[f, side].messages
                row[side]["wall_s"] = results[f, side].wall_s
        sums = totals(rows)
        report = {"upstream": source, "sides": identities, "totals": sums, "files": rows,
                  "examples": examples, "not_applicable": NOT_APPLICABLE,
                  "timeouts": {"test_s": args.test_timeout, "file_s": args.file_timeout,
                               "example_s": args.example_timeout,
                               "total_s": args.total_timeout}}
    finally:
        if args.keep:
            _log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if files:
        print(format_table(rows, sums))
    if examples:
        print()
        print(format_examples(examples))
    record = {
        "benchmark": "upstream",
        "what": "Monarch's own tests and examples, ours / torchmonarch 0.7.0",
        "command": [Path(sys.executable).name, "benchmarks/upstream.py",
                    *(argv if argv is not None else sys.argv[1:])],
        "commit": commit,
        "dirty": dirty,
        "started_utc": started.isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpus": os.cpu_count(),
        **before_load,
        **load_after(),
        "report": report,
    }
    label = f"-{args.label}" if args.label else ""
    path = write_result(f"upstream{label}", record, args.out, started)
    _log(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
