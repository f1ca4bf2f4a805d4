"""The watchdog of one FUSE mount: unmounts it when the process serving it dies.

A process that serves a mount and is killed (SIGKILL, the job killed) leaves a dead mount behind:
every access fails with ENOTCONN until someone unmounts it. The serving process starts this
program in a session of its own with a pipe on its stdin and writes "done" there when it
unmounts cleanly. End of input without "done" means the server died: the reaper then detaches
the mount, unless another mount has taken the path since (a different device number).

Run as `python -m monarch._src.mount.reaper MOUNTPOINT`.
"""

from __future__ import annotations

import subprocess
import sys


def mount_device(mountpoint: str) -> str | None:
    """The "major:minor" of the mount at `mountpoint`, or None when nothing is mounted there."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    found = None
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and _unescape(fields[4]) == mountpoint:
            found = fields[2]  # the last one listed is the one on top
    return found


def _unescape(field: str) -> str:
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def start(mountpoint: str) -> subprocess.Popen[bytes]:
    """Start the reaper of `mountpoint` (mounted already); write b"done" to its stdin and close
    it after a clean unmount."""
    return subprocess.Popen(
        [sys.executable, "-m", "monarch._src.mount.reaper", mountpoint],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True)


def main(argv: list[str]) -> int:
    mountpoint = argv[1]
    device = mount_device(mountpoint)
    data = sys.stdin.buffer.read()
    if b"done" in data or device is None:
        return 0
    if mount_device(mountpoint) != device:
        return 0  # unmounted already, or another mount took the path
    for cmd in (["fusermount3", "-u", "-z", mountpoint], ["umount", "-l", mountpoint]):
        try:
            if subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0:
                return 0
        except (OSError, subprocess.TimeoutExpired):
            continue  # that tool is missing or hung: try the next
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
