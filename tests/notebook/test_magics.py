"""`%%mesh` / `%mesh_result` against real procs: in an in-process IPython shell, and in a real
kernel (`%load_ext monarch.notebook`, stream output as a frontend receives it).

The in-process tests register the magics on IPython's test shell themselves (`register`), not
through `monarch.notebook.install()`, which would apply nest-asyncio to the whole test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.kernel import execute as _execute

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ip() -> Any:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    from monarch.notebook.magics import register

    # A plain InteractiveShell made by another test (IPython's display helpers make one) would
    # refuse the test shell's singleton: start from none.
    if InteractiveShell.initialized() and type(InteractiveShell.instance()) is InteractiveShell:
        InteractiveShell.clear_instance()
    shell = start_ipython()
    register(shell)
    return shell


@pytest.fixture
def shell(ip: Any, procs4: Any) -> Any:
    ip.user_ns["procs"] = procs4
    return ip


def _run(shell: Any, source: str) -> Any:
    return shell.run_cell(textwrap.dedent(source).strip("\n"))


def _result(shell: Any) -> Any:
    result = shell.run_cell("_last = %mesh_result")
    assert result.success, result.error_in_exec
    return shell.user_ns["_last"]


def test_namespace_persists_and_output_is_prefixed_in_rank_order(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _run(shell, """
        %%mesh procs
        import sys
        x = rank * 10
        print("hello", rank, coords)
        print("second line")
        print("oops", rank, file=sys.stderr)
        x + 1
    """)
    assert first.success, first.error_in_exec
    out, err = capsys.readouterr()
    expected = []
    for r in range(4):
        expected += [f"[rank {r}] hello {r} {{'gpus': {r}}}", f"[rank {r}] second line",
                     f"Out[rank {r}]: {r * 10 + 1}"]
    assert out.splitlines() == expected
    assert err.splitlines() == [f"[stderr:rank {r}] oops {r}" for r in range(4)]
    assert _result(shell).values() == [1, 11, 21, 31]

    second = _run(shell, """
        %%mesh procs
        y = x * 2
        y
    """)  # `x` is still there: the namespace persisted
    assert second.success, second.error_in_exec
    assert capsys.readouterr().out.splitlines() == [f"Out[rank {r}]: {r * 20}" for r in range(4)]
    values = _result(shell)
    assert values.sizes == {"gpus": 4}
    assert values.item(gpus=3) == 60

    quiet = _run(shell, """
        %%mesh procs
        y;
    """)  # a trailing `;` displays nothing, as in IPython; the value is still kept
    assert quiet.success and capsys.readouterr().out == ""
    assert _result(shell).values() == [0, 20, 40, 60]


def test_slices_run_on_their_ranks_only(shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _run(shell, "grid = procs.split(gpus=('hosts', 'local'), local=2)")
    ok = _run(shell, """
        %%mesh grid[hosts=1, local=0:1]
        print(rank, coords)
        rank
    """)
    assert ok.success, ok.error_in_exec
    assert capsys.readouterr().out.splitlines() == [
        "[rank 2] 2 {'hosts': 1, 'local': 0}", "Out[rank 2]: 2"]
    values = _result(shell)
    assert values.sizes == {"local": 1}
    assert values.values() == [2]

    one = _run(shell, """
        %%mesh procs[gpus=3]
        rank
    """)
    assert one.success, one.error_in_exec
    assert capsys.readouterr().out.splitlines() == ["Out[rank 3]: 3"]
    assert _result(shell).sizes == {}

    ranged = _run(shell, """
        %%mesh procs[gpus=1:4:2]
        rank
    """)
    assert ranged.success, ranged.error_in_exec
    assert capsys.readouterr().out.splitlines() == ["Out[rank 1]: 1", "Out[rank 3]: 3"]


def test_failing_ranks_are_summarised_once_per_distinct_error(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from monarch.notebook.magics import MeshCellError
    from monarch.notebook.mesh_magic import RankError

    failed = _run(shell, """
        %%mesh procs
        print("before", rank)
        if rank == 3:
            raise KeyError("three")
        1 / (rank % 2)
    """)
    error = failed.error_in_exec
    assert isinstance(error, MeshCellError)
    assert [e.rank for e in error.errors] == [0, 2, 3]
    out, _ = capsys.readouterr()
    assert [line for line in out.splitlines() if line.startswith("[rank")] == [
        f"[rank {r}] before {r}" for r in range(4)]
    assert "Out[rank 1]: 1.0" in out
    summary = out[out.index("MeshCellError"):]
    assert summary.splitlines()[0] == "MeshCellError: 3 of 4 ranks failed"
    assert "ranks 0,2: ZeroDivisionError: division by zero" in summary
    assert "rank 3: KeyError: 'three'" in summary
    assert summary.count("Traceback (most recent call last)") == 2  # once per distinct error
    assert 'File "<mesh-cell-' in summary and "1 / (rank % 2)" in summary  # the cell's lines
    assert "mesh_magic.py" not in summary and "magics.py" not in summary

    values = _result(shell).values()
    assert values[1] == 1.0
    assert all(isinstance(values[r], RankError) for r in (0, 2, 3))
    assert values[3].type_name == "KeyError" and values[3].rank == 3

    syntax = _run(shell, """
        %%mesh procs
        1 +
    """)
    assert isinstance(syntax.error_in_exec, MeshCellError)
    text = syntax.error_in_exec.summary
    assert "ranks 0,1,2,3: SyntaxError: invalid syntax" in text
    assert text.count("SyntaxError") == 2  # the group's line and its traceback, once


def test_unpicklable_values_come_back_as_their_repr(shell: Any) -> None:
    ok = _run(shell, """
        %%mesh procs[gpus=0]
        import threading
        threading.Lock()
    """)
    assert ok.success, ok.error_in_exec
    assert _result(shell).item().startswith("<unlocked _thread.lock object")


def test_sessions_have_their_own_namespaces_and_old_cells_keep_their_lines(
    procs4: Any,
) -> None:
    from monarch.notebook.mesh_magic import MeshMagic

    actors = procs4.slice(gpus=1).spawn("_mesh_magic", MeshMagic)

    def run(session: str, cell: int, source: str) -> Any:
        source = textwrap.dedent(source).strip("\n")
        [result] = actors.run.call(session, cell, source).get(timeout=30).values()
        return result

    assert run("one", 1, """
        def f(n):
            return [1][n]
        z = 5
    """).error is None
    assert run("two", 1, "z").error.summary == "NameError: name 'z' is not defined"
    later = run("one", 2, "f(z)").error  # raised in cell 1's function, called from cell 2
    assert later.summary == "IndexError: list index out of range"
    assert 'File "<mesh-cell-2>", line 1' in later.traceback_text
    assert 'File "<mesh-cell-1>", line 2, in f' in later.traceback_text
    assert "return [1][n]" in later.traceback_text


@pytest.mark.parametrize("body", ["check_cancelled()", "pass"])
def test_a_cancelled_cell_frees_the_proc_for_the_next(
    procs4: Any, tmp_path: Path, body: str
) -> None:
    """What an interrupt does to a running `%%mesh` cell: the call is cancelled, a cell polling
    `check_cancelled()` stops there, one that does not is interrupted in its own code half a
    second later, and the next cell on those procs runs."""
    from monarch.notebook.mesh_magic import MeshMagic

    actors = procs4.slice(gpus=0).spawn("_mesh_magic", MeshMagic)
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    looping = actors.run.call("cancel-test", 1, textwrap.dedent(f"""
        from monarch.actor import check_cancelled
        with open({str(fifo)!r}, "w") as started:
            started.write("x")
        while True:
            {body}
    """))
    with open(fifo) as started:  # blocks until the cell runs
        assert started.read() == "x"
    assert looping.cancel()
    after = actors.run.call("cancel-test", 2, "rank").get(timeout=20)
    assert [r.value for r in after.values()] == [0]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%%mesh", "needs the name of a ProcMesh"),
        ("%%mesh 1procs", "needs the name of a ProcMesh"),
        ("%%mesh nowhere", "no variable 'nowhere'"),
        ("%%mesh procs[gpus=__import__('os')]", "is not a dimension slice"),
        ("%%mesh procs[gpus=0.5]", "is not a dimension slice"),
        ("%%mesh procs[gpus]", "is not dim=value"),
        ("%%mesh procs[gpus=0, gpus=1]", "sliced twice"),
        ("%%mesh procs[hosts=0]", "hosts"),
        ("%%mesh procs[gpus=9]", "%%mesh procs[gpus=9]:"),
        ("%%mesh actors", "is an ActorMesh: name the ProcMesh"),
        ("%%mesh number", "is a int, not a ProcMesh"),
    ],
)
def test_bad_targets_are_usage_errors(shell: Any, line: str, message: str) -> None:
    from IPython.core.error import UsageError

    from monarch.notebook.mesh_magic import MeshMagic

    shell.user_ns["number"] = 3
    if "actors" not in shell.user_ns:
        shell.user_ns["actors"] = shell.user_ns["procs"].spawn("magic_target", MeshMagic)
    result = shell.run_cell(f"{line}\nprint('never')")
    assert isinstance(result.error_in_exec, UsageError)
    assert message in str(result.error_in_exec)


def test_mesh_result_before_any_cell_is_a_usage_error() -> None:
    from IPython.core.error import UsageError

    from monarch.notebook.magics import MeshMagics

    magics = MeshMagics(None)
    with pytest.raises(UsageError, match="no %%mesh cell has run yet"):
        magics.mesh_result("")
    with pytest.raises(UsageError, match="takes no argument"):
        magics.mesh_result("procs")


def test_importing_monarch_actor_under_ipython_registers_the_magics() -> None:
    code = (
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "import monarch.actor\n"
        "print(sorted(set(ip.magics_manager.magics['cell']) & {'mesh'}),"
        " 'mesh_result' in ip.magics_manager.magics['line'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['mesh'] True"


# ---- through a real kernel ----------------------------------------------------------------


def _streams(messages: list[dict[str, Any]], name: str) -> str:
    return "".join(m["content"]["text"] for m in messages
                   if m["msg_type"] == "stream" and m["content"]["name"] == name)


def test_load_ext_in_a_kernel_and_stream_output_arrives_prefixed(tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    manager, client = start_new_kernel(
        kernel_name="python3", cwd=str(REPO), env=env, startup_timeout=60
    )
    try:
        reply, _ = _execute(client, "%load_ext monarch.notebook")
        assert reply["status"] == "ok", reply
        reply, _ = _execute(client, textwrap.dedent("""
            from monarch.actor import this_host
            procs = this_host().spawn_procs(per_host={"gpus": 2})
        """))
        assert reply["status"] == "ok", reply

        reply, messages = _execute(client, "%%mesh procs\nprint('hello from', rank)\nrank * 7")
        assert reply["status"] == "ok", reply
        assert _streams(messages, "stdout").splitlines() == [
            "[rank 0] hello from 0", "Out[rank 0]: 0", "[rank 1] hello from 1", "Out[rank 1]: 7"]

        failing = "%%mesh procs\nimport sys\nprint(1 / rank, file=sys.stderr)"
        reply, messages = _execute(client, failing, stop_on_error=False)
        assert reply["status"] == "error" and reply["ename"] == "MeshCellError", reply
        assert _streams(messages, "stderr") == "[stderr:rank 1] 1.0\n"
        errors = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert len(errors) == 1
        shown = "\n".join(errors[0]["traceback"])
        assert shown.startswith("MeshCellError: 1 of 2 ranks failed\nrank 0: ZeroDivisionError")
        assert shown.count("Traceback (most recent call last)") == 1

        reply, messages = _execute(client, "%mesh_result")
        assert reply["status"] == "ok", reply
        results = [m["content"]["data"]["text/plain"] for m in messages
                   if m["msg_type"] == "execute_result"]
        assert len(results) == 1 and "RankError(rank 0: ZeroDivisionError" in results[0]

        _interrupt_a_running_cell(manager, client, tmp_path)

        reply, _ = _execute(client, "procs.stop().get(timeout=60)")
        assert reply["status"] == "ok", reply
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _interrupt_a_running_cell(manager: Any, client: Any, tmp_path: Path) -> None:
    """Interrupting the kernel while rank 0 runs a looping cell ends the cell in the notebook;
    the cell, polling `check_cancelled()`, stops on the proc, and the next cell runs."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    msg_id = client.execute(textwrap.dedent(f"""\
        %%mesh procs[gpus=0]
        from monarch.actor import check_cancelled
        with open({str(fifo)!r}, "w") as started:
            started.write("x")
        while True:
            check_cancelled()
    """), stop_on_error=False)  # see tests/notebook/kernel.py
    with open(fifo) as started:  # returns once the cell runs on the proc
        assert started.read() == "x"
    manager.interrupt_kernel()
    reply = client.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = client.get_shell_msg(timeout=60)
    assert reply["content"]["status"] == "error", reply["content"]
    assert reply["content"]["ename"] in ("KeyboardInterrupt", "Interrupted"), reply["content"]
    reply, messages = _execute(client, "%%mesh procs\nrank")
    assert reply["status"] == "ok", reply
    assert _streams(messages, "stdout").splitlines() == ["Out[rank 0]: 0", "Out[rank 1]: 1"]
