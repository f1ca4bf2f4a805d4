"""torchmonarch's `monarch._src.actor.bootstrap_main`: the program a bootstrap command runs.

`python -m monarch._src.actor.bootstrap_main` (what `default_bootstrap_cmd()` runs) serves as
the proc whose spec its host names in `MONARCH_PROC_SPEC_FD` (`monarch._src.hosts.exec_proc`).
"""

import sys

from monarch._src.hosts.exec_proc import run_and_exit

if __name__ == "__main__":
    run_and_exit(sys.argv[1:])
