"""A real one-node Slurm cluster (munged, slurmctld, slurmd) in a temporary directory.
Started by the Slurm tests as root; every daemon runs in the foreground as a child of the test
process, so stopping them is killing those children. Needs Debian's `slurm-wlm` and `munge`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from typing import Any

from monarch._src.hosts.addresses import free_port

# Bound on the daemons starting and the node becoming usable.
START_TIMEOUT = 30.0


def unavailable_reason() -> str | None:
    """Why a Slurm cluster cannot be started here, or None if it can."""
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch") if shutil.which(b) is None]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing); install Debian's "
                "slurm-wlm and munge")
    if os.geteuid() != 0:
        return "starting slurmd needs root (it runs jobs as their users)"
    return None


class SlurmCluster:
    """Owns the daemons; `env` is what Slurm client commands need (SLURM_CONF)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[Any]] = []
        self._log: Any = None  # the daemons' shared output file, closed by stop()
        self.node = socket.gethostname()
        self.conf = os.path.join(root, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def _write_conf(self) -> None:
        r = self.root
        for d in ("state", "spool", "munge"):
            os.makedirs(os.path.join(r, d), exist_ok=True)
        cpus = os.cpu_count() or 1
        conf = f"""\
ClusterName=monarchtest
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port("127.0.0.1")}
SlurmdPort={free_port("127.0.0.1")}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.sock
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SchedulerParameters=sched_interval=1,sched_min_interval=100000
MpiDefault=none
PlugStackConfig={r}/plugstack.conf
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""
        with open(self.conf, "w") as f:
            f.write(conf)
        open(os.path.join(r, "plugstack.conf"), "w").close()

    def start(self) -> None:
        """Start munged, slurmctld and slurmd; return once the node is idle."""
        self._write_conf()
        r = self.root
        key = os.path.join(r, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        os.chmod(os.path.join(r, "munge"), 0o700)
        log = self._log = open(  # noqa: SIM115 - closed by stop()
            os.path.join(r, "daemons.log"), "ab")
        self.procs.append(subprocess.Popen(
            ["munged", "-F", "--force", f"--key-file={key}",
             f"--socket={r}/munge/munge.sock", f"--pid-file={r}/munge/munged.pid",
             f"--log-file={r}/munge/munged.log", f"--seed-file={r}/munge/munged.seed"],
            stdout=log, stderr=log, env=self.env))
        self._wait(lambda: os.path.exists(f"{r}/munge/munge.sock"), "munged socket")
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", self.conf],
                                           stdout=log, stderr=log, env=self.env))
        self.procs.append(subprocess.Popen(["slurmd", "-D", "-f", self.conf],
                                           stdout=log, stderr=log, env=self.env))
        self._wait(self._node_idle, "the Slurm node to become idle")

    def _node_idle(self) -> bool:
        out = subprocess.run(check=False, args=["sinfo", "-h", "-o", "%t"], capture_output=True,
                             text=True, env=self.env, timeout=10)
        return out.returncode == 0 and out.stdout.strip().startswith("idle")

    def _wait(self, cond: Any, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not cond():
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited ({p.returncode}) waiting for {what}; "
                                       f"see {self.root}/daemons.log and the *.log files.")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Timed out waiting for {what}; see {self.root}.")
            time.sleep(0.1)

    def stop(self) -> None:
        """Cancel every job, kill the daemons (newest first) and wait for them."""
        if self.procs and all(p.poll() is None for p in self.procs):
            subprocess.run(check=False, args=["scancel", "--user=root", "--full"],
                           capture_output=True, env=self.env, timeout=10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and subprocess.run(
                    ["squeue", "-h"], check=False, capture_output=True, text=True, env=self.env,
                    timeout=10).stdout.strip():
                time.sleep(0.1)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        if self._log is not None:
            self._log.close()
