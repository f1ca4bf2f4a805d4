"""Monarch's jobs page, running commands: ``exec_command`` on a host mesh.

Follows "Jobs" (``monarch.job.exec_command``): a plain command runs on procs spawned
``per_host`` on every host and finds its place in ``MONARCH_RANK_<dim>``/``MONARCH_SIZE_<dim>``;
the Future resolves to the largest exit code; ``env`` and ``workdir`` reach the command;
``output_dir`` with ``$SUBDIR`` gives each proc its own ``stdout.txt``/``stderr.txt``; a ``.py``
command runs as a Python script; ``rank`` picks a host of the flattened host mesh.
"""

import os
import tempfile

from compat import check

from monarch.actor import this_host
from monarch.job import exec_command


def files_under(root: str) -> list:
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path) as f:
                found.append((os.path.relpath(path, root), f.read()))
    return sorted(found)


host = this_host()
out = tempfile.mkdtemp()
work = os.path.join(out, "work")
os.mkdir(work)
code = exec_command(
    host, ["bash", "-c", "echo $MONARCH_RANK_gpus/$MONARCH_SIZE_gpus $GREETING $(basename $PWD); "
                         "echo note >&2; exit $MONARCH_RANK_gpus"],
    env={"GREETING": "hi"}, workdir=work, per_host={"gpus": 3},
    output_dir=os.path.join(out, "logs", "$SUBDIR")).get()
check("largest exit code", code)
check("per-proc output files", files_under(os.path.join(out, "logs")))

script_dir = tempfile.mkdtemp()
script = os.path.join(script_dir, "report.py")
with open(script, "w") as f:
    f.write("import os, sys\nprint('script', os.environ['MONARCH_RANK_gpus'], sys.argv[1:])\n")
logs = os.path.join(script_dir, "logs")
check("a .py command", exec_command(host, [script, "--flag"], per_host={"gpus": 2},
                                    output_dir=os.path.join(logs, "$SUBDIR")).get())
check("what the script printed", files_under(logs))

one = tempfile.mkdtemp()
check("rank 0 of this host", exec_command(host, ["bash", "-c", "echo $MONARCH_SIZE_gpus"],
                                          rank=0, per_host={"gpus": 2},
                                          output_dir=os.path.join(one, "$SUBDIR")).get())
check("procs of the picked host", files_under(one))
check("failing command", exec_command(host, ["bash", "-c", "exit 5"]).get())
