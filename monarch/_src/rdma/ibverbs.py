"""ibverbs: the probe for a verbs device, and the probe's outcome only (see `verbs.py`).

`probe()` answers whether ibverbs can be used here and, if not, why: the config switch
`rdma_disable_ibverbs`, a malformed `rdma_ibverbs_target`, no InfiniBand/RoCE device in sysfs,
pyverbs missing (it must match the system's rdma-core: Debian's `python3-pyverbs`, found in
/usr/lib/python3/dist-packages even from a virtual environment when its extension modules match
this interpreter), or pyverbs listing no device. The answer is cached per process;
`reset_probe()` clears it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import sysconfig
from dataclasses import dataclass

from monarch._src.config import get as config_get
from monarch._src.rdma.errors import RdmaInitError

__all__ = ["SYSFS_DIR", "Probe", "import_pyverbs", "probe", "reset_probe"]

SYSFS_DIR = "/sys/class/infiniband"
DEBIAN_DIR = "/usr/lib/python3/dist-packages/pyverbs"


def import_pyverbs() -> bool:
    """Make `import pyverbs` work if it is installed for this interpreter; False if it is not."""
    if "pyverbs" in sys.modules:
        return True
    if importlib.util.find_spec("pyverbs") is not None:
        return True
    # A virtual environment does not see Debian's python3-pyverbs; load that package by path
    # when its compiled modules were built for this very interpreter (same ABI tag).
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ""
    if not os.path.exists(os.path.join(DEBIAN_DIR, "device" + suffix)):
        return False
    spec = importlib.util.spec_from_file_location(
        "pyverbs", os.path.join(DEBIAN_DIR, "__init__.py"), submodule_search_locations=[DEBIAN_DIR])
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    sys.modules["pyverbs"] = module
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - an unusable install is the same as none
        del sys.modules["pyverbs"]
        return False
    return True


@dataclass(frozen=True)
class Probe:
    """The outcome of looking for a verbs device."""

    available: bool  # True when a device can be opened through pyverbs
    reason: str  # the device name when available, else why not (for skip messages and errors)


def probe() -> Probe:
    """Whether ibverbs is usable in this process, and the device or the reason."""
    if config_get("rdma_disable_ibverbs"):
        return Probe(False, "ibverbs is disabled by the config key rdma_disable_ibverbs.")
    try:
        target = device_target(str(config_get("rdma_ibverbs_target")))
    except RdmaInitError as exc:  # the manager's start reports it (`readiness.check_settings`)
        return Probe(False, str(exc))
    return _probe_system(SYSFS_DIR, target)


def device_target(setting: str) -> str | None:
    """The device named by `rdma_ibverbs_target`: 'nic:<name>' names it, '' is None (the first
    device); anything else raises `RdmaInitError` (Monarch's rule: a target says its kind)."""
    text = setting.strip()
    if not text:
        return None
    name = text.removeprefix("nic:")
    if name == text or not name:
        raise RdmaInitError(
            f'invalid RDMA_IBVERBS_TARGET (`rdma_ibverbs_target` in Python) value "{text}": '
            f'ibverbs target "{text}" must be `nic:<name>` (e.g. "nic:mlx5_0"); choosing by '
            "`cpu:<numa>` or `gpu:<ordinal>` is not supported here. Set it to 'nic:<name>', "
            "or to '' for the first device."
        )
    return name


@functools.cache
def _probe_system(sysfs: str, target: str | None) -> Probe:
    try:
        names = sorted(os.listdir(sysfs))
    except OSError:
        names = []
    if not names:
        return Probe(False, f"no InfiniBand or RoCE device: {sysfs} is missing or empty.")
    try:
        if not import_pyverbs():
            raise ImportError("pyverbs")
        from pyverbs.device import get_device_list  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return Probe(False, "pyverbs is not importable; install the system's python3-pyverbs.")
    try:
        devices = [d.name.decode() for d in get_device_list()]
    except Exception as exc:  # noqa: BLE001 - pyverbs raises its own PyverbsError types
        return Probe(False, f"pyverbs could not list devices: {exc}")
    if target is not None:
        devices = [d for d in devices if d == target]
    if not devices:
        want = f" named {target!r}" if target else ""
        return Probe(False, f"pyverbs lists no verbs device{want}.")
    return Probe(True, devices[0])


def reset_probe() -> None:
    """Forget the cached probe outcome."""
    _probe_system.cache_clear()
