"""`python -m monarch._src.spmd._worker_entry`: a worker started by `host_mesh_from_store`.

It serves as a monarch host at `_MONARCH_WORKER_ADDR` and exits when the rank that started it
is gone: a thread blocks reading the pipe named by `_MONARCH_WORKER_PARENT_WATCH_FD`, which
returns end of file once the rank, the only holder of its write end, ended.
"""

from __future__ import annotations

import os
import sys
import threading

from monarch._src.hosts.remote import run_worker_loop_forever


def _exit_with_parent(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass  # nobody writes; only the end of file matters
    except OSError as exc:
        print(f"monarch worker: reading the parent's pipe failed ({exc}); exiting",
              file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)  # the parent is gone; the zygote's stdin watch ends our procs


def main() -> None:
    addr = os.environ["_MONARCH_WORKER_ADDR"]
    fd = os.environ.get("_MONARCH_WORKER_PARENT_WATCH_FD")
    if fd is not None:
        threading.Thread(target=_exit_with_parent, args=(int(fd),), daemon=True,
                         name="monarch-worker-parent-watch").start()
    run_worker_loop_forever(address=addr, ca="trust_all_connections")


if __name__ == "__main__":
    main()
