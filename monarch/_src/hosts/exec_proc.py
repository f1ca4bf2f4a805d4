"""`python -m monarch._src.hosts.exec_proc FD`: a proc running another interpreter.

`HostMesh.with_python_executable(path)` makes the zygote's forked child exec `path` with this
module instead of running the proc in the zygote's interpreter, and
`spawn_procs(bootstrap_command=...)` makes it exec the command's program, which runs
`monarch._src.actor.bootstrap_main` (this module's `main` with no argument: the fd is then named
by `MONARCH_PROC_SPEC_FD`). The pid stays the same, so the host agent's child watch and the
parent-death signal keep working; the proc's spec (a pickle) is read from the inherited file
descriptor FD, then the proc runs as any other (`proc_main.run_proc`).
"""

from __future__ import annotations

import os
import pickle
import sys

from monarch._src.hosts.bootstrap_command import BOOTSTRAP_MAIN, SPEC_FD_ENV


def main(argv: list[str]) -> int:
    """Read the spec from the fd in `argv[0]` (else `MONARCH_PROC_SPEC_FD`) and serve as that
    proc; returns its status."""
    named = argv[0] if argv else os.environ.pop(SPEC_FD_ENV, None)
    if named is None:
        print(f"monarch: {BOOTSTRAP_MAIN} starts a proc for a monarch host, which names the "
              f"proc's spec in {SPEC_FD_ENV}; it is not run by hand. Use `monarch worker` to "
              "make this machine a host.", file=sys.stderr)
        return 2
    fd = int(named)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    spec = pickle.loads(b"".join(chunks))
    keep_launcher_changes(spec)
    from monarch._src.hosts import local
    from monarch._src.hosts.proc_main import run_proc

    # Procs this one starts with this_host() are started the same way (a wrapper script is not
    # sys.executable: the interpreter it starts is).
    local.set_launched_with(spec.pop("python", None))

    return run_proc(spec)


def keep_launcher_changes(spec: dict[str, object]) -> None:
    """A proc takes the controller's environment (`spec["env"]`); what the interpreter's
    launcher changed on top of what the zygote started it with (`spec["exec_env"]`: a wrapper
    script's `export`, say) applies to the proc too, as it does to the interpreter."""
    sent = spec.pop("exec_env", None)
    if not isinstance(sent, dict):
        return
    env = dict(spec["env"])  # type: ignore[call-overload]
    env.update({k: v for k, v in os.environ.items() if sent.get(k) != v})
    for key in sent.keys() - os.environ.keys():  # unset by the launcher
        env.pop(key, None)
    spec["env"] = env


def run_and_exit(argv: list[str]) -> None:
    """`main(argv)`, then exit the process with its status at once (output flushed first):
    a proc's threads are not joined."""
    status = 1
    try:
        status = main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


if __name__ == "__main__":
    run_and_exit(sys.argv[1:])
