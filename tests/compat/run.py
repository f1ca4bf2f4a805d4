"""Run the compatibility programs and compare their checks with the golden files.

    python tests/compat/run.py [--python PY] [--record] [--timeout S] [PROGRAM ...]

Each program in ``programs/`` runs in its own interpreter (``--python``, default: this one), with
``programs/`` as its working directory and on ``PYTHONPATH``. Its ``check ...`` lines are compared
with ``expected/<program>.out``; ``--record`` writes them there instead (record from torchmonarch
0.7.0: ``--python benchmarks/.venv-torchmonarch/bin/python``).

Not every module in ``programs/`` is a program: ``compat`` (what every program uses) and any
module whose name starts with ``_`` (helpers that several programs share, such as
``_supervision``) are imported, never run; packages such as ``tensorfns/`` are not run either.

Standard library only, so it runs under either implementation's venv. Exits 1 when a program
fails; the last line reads ``compat: N passed, N failed, N not run``, counting behaviours (checks):
on torchmonarch the ``ours_only`` ones are not run (their line matches without proving
anything), so they are counted apart, not as passes.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
EXPECTED = HERE / "expected"
DEFAULT_TIMEOUT = 120.0


def program_names() -> list[str]:
    """Every program, by file stem, sorted (helper modules, `compat` and `_*`, are not ones)."""
    return sorted(p.stem for p in PROGRAMS.glob("*.py")
                  if p.stem != "compat" and not p.stem.startswith("_"))


@dataclass
class Result:
    name: str
    checks: list[str]
    expected: list[str] | None
    returncode: int | None
    output: str
    seconds: float
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def run_program(name: str, python: str, timeout: float = DEFAULT_TIMEOUT) -> Result:
    """Run one program and compare its checks with its golden file."""
    script = PROGRAMS / f"{name}.py"
    if os.sep in python:
        python = os.path.abspath(python)  # the programs run in programs/; keep the venv's link
    if not script.is_file():
        raise FileNotFoundError(f"no compat program {name!r} (looked for {script})")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROGRAMS), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [python, script.name], cwd=PROGRAMS, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, text=True,
            errors="replace",
        )
        returncode: int | None = proc.returncode
        output = proc.stdout
    except subprocess.TimeoutExpired as exc:
        returncode = None
        raw = exc.stdout or b""
        output = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    seconds = time.monotonic() - start
    checks = [line for line in output.splitlines() if line.startswith("check ")]
    golden = EXPECTED / f"{name}.out"
    expected = golden.read_text().splitlines() if golden.is_file() else None
    result = Result(name, checks, expected, returncode, output, seconds)
    if returncode is None:
        result.failures.append(f"timed out after {timeout:.0f} s")
    elif returncode != 0:
        result.failures.append(f"exited with status {returncode}")
    if expected is None:
        result.failures.append(f"no golden file {golden.relative_to(HERE.parent.parent)}; "
                               "record it from torchmonarch with --record")
    elif checks != expected:
        diff = difflib.unified_diff(expected, checks, "torchmonarch (golden)", "this run",
                                    lineterm="", n=1)
        result.failures.append("checks differ:\n" + "\n".join(diff))
    return result


# What an `ours_only` behaviour prints on torchmonarch instead of running (programs/compat.py).
NOT_RUN_PREFIX = "not run on torchmonarch: "


def _label(check_line: str) -> str:
    return check_line[len("check "):].split(":", 1)[0]


def count_passed(result: Result) -> tuple[int, int, int]:
    """(passed, failed, not run) behaviours: a check passes when its line matches the golden's;
    one that torchmonarch cannot run (`ours_only`, announced by a NOT_RUN_PREFIX line) matches
    there without proving anything, so on torchmonarch it counts as not run, not as a pass."""
    expected = result.expected or []
    if result.returncode is None or result.returncode != 0:
        # A crashed or hung program proves nothing past its last check.
        got = set(result.checks) & set(expected)
    else:
        got = set(result.checks)
    not_run_labels = {line[len(NOT_RUN_PREFIX):] for line in result.output.splitlines()
                      if line.startswith(NOT_RUN_PREFIX)}
    matched = [line for line in expected if line in got]
    not_run = sum(1 for line in matched if _label(line) in not_run_labels)
    passed = len(matched) - not_run
    return passed, max(len(expected), len(result.checks)) - len(matched), not_run


def record(result: Result) -> None:
    if result.returncode != 0:
        raise SystemExit(f"{result.name}: not recorded, the program "
                         f"{'timed out' if result.returncode is None else 'failed'}:\n"
                         f"{result.output[-4000:]}")
    EXPECTED.mkdir(exist_ok=True)
    (EXPECTED / f"{result.name}.out").write_text("".join(f"{c}\n" for c in result.checks))
    print(f"recorded {result.name}: {len(result.checks)} checks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="*", help="program names (default: all)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run them with")
    parser.add_argument("--record", action="store_true", help="write the golden files")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("-v", "--verbose", action="store_true", help="print each program's output")
    args = parser.parse_args(argv)
    names = args.programs or program_names()
    unknown = sorted(set(names) - set(program_names()))
    if unknown:
        parser.error(f"unknown program(s) {', '.join(unknown)}; see {PROGRAMS}")
    passed = failed = not_run = bad_programs = 0
    for name in names:
        result = run_program(name, args.python, args.timeout)
        if args.verbose:
            print(result.output)
        if args.record:
            record(result)
            continue
        ok_checks, bad_checks, skipped = count_passed(result)
        passed += ok_checks
        failed += bad_checks
        not_run += skipped
        status = "ok" if result.ok else "FAIL"
        unrun = f" ({skipped} not run here)" if skipped else ""
        print(f"{status:4} {name}: {ok_checks}/{ok_checks + bad_checks + skipped} checks{unrun}, "
              f"{result.seconds:.1f} s", flush=True)
        if not result.ok:
            bad_programs += 1
            for failure in result.failures:
                print("     " + failure.replace("\n", "\n     "))
            if result.returncode != 0:
                print("     output tail:\n     " + result.output[-3000:].replace("\n", "\n     "))
    if args.record:
        return 0
    print(f"compat: {len(names)} programs, {bad_programs} failed")
    print(f"compat: {passed} passed, {failed} failed, {not_run} not run (ours-only behaviours "
          "torchmonarch cannot run)")
    return 1 if bad_programs else 0


if __name__ == "__main__":
    sys.exit(main())
