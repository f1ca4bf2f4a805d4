"""`python -m monarch.tools.mount_daemon SOCKET JOB_FILE`: the mount daemon of an applied job.

Started by `monarch._src.job.mount_daemon` (where the design is described); here because it is
a controller: it imports the controller's facade before attaching to the job's hosts.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import Any


def _log_fault(failure: Any) -> None:
    # A host that dies fails its mounts' reads with EIO; the daemon serves the others on.
    logging.getLogger(__name__).warning("mount daemon: %s", failure)


def main(argv: list[str]) -> int:
    """Serve the mounts of the job in `argv[1]` on the socket `argv[0]` until told to stop."""
    if len(argv) != 2:
        sys.stderr.write("usage: python -m monarch.tools.mount_daemon SOCKET JOB_FILE\n")
        return 2
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` writes every thread's stack to the log
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    import monarch.actor
    from monarch._src.job.mount_daemon import serve

    monarch.actor.unhandled_fault_hook = _log_fault
    try:
        code = serve(*argv)
    except BaseException:  # reported in the log, which the starting command shows
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the runtime's threads must not hold the exit once the mounts are closed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
