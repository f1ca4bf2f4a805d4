"""The table logic of `benchmarks/upstream.py` (Monarch's own tests on both implementations), on
synthetic pytest junit XML and `-v` output: no upstream tree and no second venv needed."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.timeout(60)

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _upstream() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("upstream")


# What pytest 9 writes for `_monarch/test_x.py` run from the tests' root: a class, a
# parametrized test, a failure, an error, a skip.
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5">
<testcase classname="_monarch.test_x.TestA" name="test_one" time="0.1"/>
<testcase classname="_monarch.test_x" name="test_two[a-1]" time="0.1"/>
<testcase classname="_monarch.test_x" name="test_three" time="0.1">
  <failure message="AssertionError: assert 1 == 2&#10;second line">trace</failure></testcase>
<testcase classname="_monarch.test_x" name="test_four" time="0.1">
  <error message="failed on setup with &quot;TimeoutError&quot;">trace</error></testcase>
<testcase classname="_monarch.test_x" name="test_five" time="0.0">
  <skipped type="pytest.skip" message="needs CUDA">skip</skipped></testcase>
</testsuite></testsuites>"""

COLLECT_ERROR = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="0" skipped="0" tests="1">
<testcase classname="" name="test_y" time="0.0">
  <error message="collection failure">ImportError while importing test module '/t/test_y.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
test_y.py:3: in &lt;module&gt;
    from monarch._rust_bindings.monarch_hyperactor.actor import PythonMessage
E   ModuleNotFoundError: No module named 'monarch._rust_bindings.monarch_hyperactor.actor'
</error></testcase></testsuite></testsuites>"""


def test_parse_junit_outcomes_ids_and_messages_match_pytest_node_ids() -> None:
    up = _upstream()
    tests, messages, collect_error = up.parse_junit(JUNIT, "_monarch/test_x.py")
    assert tests == {
        "_monarch/test_x.py::TestA::test_one": "passed",
        "_monarch/test_x.py::test_two[a-1]": "passed",
        "_monarch/test_x.py::test_three": "failed",
        "_monarch/test_x.py::test_four": "error",
        "_monarch/test_x.py::test_five": "skipped",
    }
    assert messages["_monarch/test_x.py::test_three"] == "AssertionError: assert 1 == 2"
    assert collect_error == ""


def test_parse_junit_collection_error_gives_import_errors_first_line() -> None:
    up = _upstream()
    tests, _, collect_error = up.parse_junit(COLLECT_ERROR, "test_y.py")
    assert tests == {}
    assert collect_error == (
        "ModuleNotFoundError: No module named 'monarch._rust_bindings.monarch_hyperactor.actor'")


def test_parse_verbose_keeps_finished_tests_of_a_killed_run() -> None:
    up = _upstream()
    out = ("test_z.py::test_a PASSED                                  [ 33%]\n"
           "test_z.py::TestB::test_b[x] FAILED                        [ 66%]\n"
           "test_z.py::test_c some stray output from a proc SKIPPED (no gpu) [100%]\n"
           "test_z.py::test_d \n")  # killed while test_d ran: no outcome for it
    assert up.parse_verbose(out) == {"test_z.py::test_a": "passed",
                                     "test_z.py::TestB::test_b[x]": "failed",
                                     "test_z.py::test_c": "skipped"}


def test_compare_and_totals_bucket_each_test_and_share_counts_only_peer_passes() -> None:
    up = _upstream()
    ours = up.FileRun("ran", {"f.py::a": "passed", "f.py::b": "failed", "f.py::c": "passed",
                              "f.py::d": "skipped"})
    peer = up.FileRun("ran", {"f.py::a": "passed", "f.py::b": "passed", "f.py::c": "failed",
                              "f.py::d": "failed", "f.py::e": "passed"})
    missing = up.FileRun("not_collected", {}, "ModuleNotFoundError: No module named 'x'")
    peer_g = up.FileRun("ran", {"g.py::a": "passed", "g.py::b": "error"})
    rows = {"f.py": up.compare_file(ours, peer), "g.py": up.compare_file(missing, peer_g)}
    f = rows["f.py"]
    assert (f["both"], f["torchmonarch_only"], f["ours_only"], f["neither"]) == (1, 2, 1, 1)
    assert f["tests"]["torchmonarch_only"] == ["f.py::b", "f.py::e"]
    assert (rows["g.py"]["torchmonarch_only"], rows["g.py"]["neither"]) == (1, 1)
    sums = up.totals(rows)
    assert (sums["collected_ours"], sums["collected_torchmonarch"]) == (4, 7)
    assert (sums["passed_ours"], sums["passed_torchmonarch"]) == (2, 4)
    assert sums["files_not_collected_ours"] == 1
    assert sums["files_not_collected_torchmonarch"] == 0
    # 1 of the 4 tests passing on torchmonarch passes on ours; ours-only passes do not count.
    assert sums["share_of_torchmonarch_passes_passing_on_ours"] == 0.25
    table = up.format_table(rows, sums)
    assert "| g.py | 0 | 1 | 0 | 1 | not_collected: ModuleNotFoundError: No module named 'x' |" \
        in table
    assert "25.0% (1/4)" in table


def test_classify_example_tells_gpu_needs_timeouts_and_failures_apart() -> None:
    up = _upstream()
    assert up.classify_example(0, False, "done") == "ok"
    assert up.classify_example(None, True, "") == "timeout"
    assert up.classify_example(1, False, "Traceback...\nAssertionError: Torch not compiled "
                                         "with CUDA enabled") == "needs GPU"
    assert up.classify_example(1, False, "Traceback (most recent call last):\n  File x\n"
                                         "ValueError: bad mesh\n") == "failed: ValueError: bad mesh"


def test_a_run_takes_the_processes_it_detached_with_it(tmp_path: Path) -> None:
    # A job's worker hosts leave the run's process group (their own session): the runner finds
    # them by the run's token in their environment.
    import os

    from tests.pidwait import exits

    pid_file = tmp_path / "pid"
    child = ("import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
             "'import time; time.sleep(600)'], start_new_session=True); "
             f"open({str(pid_file)!r}, 'w').write(str(p.pid))")
    returncode, timed_out, _, _ = _upstream()._run_group(
        [sys.executable, "-c", child], tmp_path, dict(os.environ), 30)
    assert (returncode, timed_out) == (0, False)
    assert exits(int(pid_file.read_text()), timeout=10)
