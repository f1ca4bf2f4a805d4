"""Run torchtitan's own `torchtitan.train` entry point, unmodified, on CPU with torch 2.13.

    python cookbook/torchtitan/cpu_launch.py [torchtitan train arguments...]

Every rank runs this file in a torchrun-style environment (`RANK`, `WORLD_SIZE`,
`LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`), as `monarch exec`, `exec_command` and
`monarch.spmd`'s `SPMDActor.main` set it; without one it runs as a single rank. The file
changes nothing in torchtitan's files: it sets environment variables and replaces a few names
in already-imported modules before torchtitan's trainer reads them, each one explained where it
is made (`apply_cpu_adaptations`). It then:

* builds the local tokenizer and dataset (`assets.ensure_assets`) and points torchtitan at them;
* prepends `DEFAULT_ARGS` (debug model, CPU-sized shapes, float32, step count) to the caller's
  arguments (later arguments win, so any default can be overridden);
* hooks torchtitan's metrics so each logged step becomes a `step_reports` record (printed as a
  `titan-step {json}` line and handed to in-process listeners);
* calls `torchtitan.train.main()`.

It can be run in-process more than once (the monarch.spmd path runs it in a long-lived proc):
the adaptations are applied once per process, by the importable `cookbook.torchtitan.cpu_launch`
module (the `__main__` block defers to it).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a file: make `cookbook.torchtitan` importable under the same name the controller
    # uses, so in-process listeners and this hook share one `step_reports` module.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cookbook.torchtitan import step_reports
from cookbook.torchtitan.assets import ensure_assets

# The one list of defaults: torchtitan's llama3 debug model (6 layers, dim 256, vocab 2048),
# shaped for two CPU ranks. Callers append their own arguments, which win.
DEFAULT_ARGS: tuple[str, ...] = (
    "--module", "llama3",
    "--config", "llama3_debugmodel",
    # torch 2.13 lacks the SPMD backend 0.3.0 picks by default.
    "--parallelism.spmd_backend", "partial_dtensor",
    # bf16 matmuls are ~50x slower than float32 on this CPU.
    "--training.mixed_precision_param", "float32",
    # The debug config's 8 x 2048 tokens per rank take minutes per step on CPU.
    "--training.seq_len", "256",
    "--training.local_batch_size", "4",
    "--training.steps", "10",
    # The debug config validates every 5 steps on a c4 split we do not have.
    "--validator.no-enable",
)

_applied = False


class _CpuDeviceModule:
    """Stands in for `torch.cuda` in torchtitan's `device_module` when the device is the CPU.

    Delegates to `torch.cpu` and adds the memory calls torchtitan's `DeviceMemoryMonitor`
    makes, answered from the process's resident set (Linux `/proc/self/status`): "reserved"
    and "active" peaks are the process's peak RSS (VmHWM), capacity is the machine's RAM.
    `reset_peak_memory_stats` does nothing, so every step reports the peak since start.
    """

    def __getattr__(self, name: str) -> Any:
        import torch

        return getattr(torch.cpu, name)

    @staticmethod
    def current_device() -> int:
        # torch.cpu.current_device() returns "cpu"; torchtitan passes this to
        # `barrier(device_ids=[...])`, which wants an int.
        return 0

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        import platform

        return platform.processor() or platform.machine() or "cpu"

    @staticmethod
    def get_device_properties(device: Any = None) -> Any:
        from types import SimpleNamespace

        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return SimpleNamespace(total_memory=total, name="cpu")

    @staticmethod
    def memory_stats(device: Any = None) -> dict[str, int]:
        peak = rss_peak_bytes()
        return {
            "active_bytes.all.peak": peak,
            "reserved_bytes.all.peak": peak,
            "num_alloc_retries": 0,
            "num_ooms": 0,
        }

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None


def rss_peak_bytes() -> int:
    """This process's peak resident set size (VmHWM), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _set_torchrun_defaults() -> None:
    """A lone `python cpu_launch.py` is one rank of one."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])


def apply_cpu_adaptations() -> None:
    """Make torchtitan 0.3.0 train on CPU under torch 2.13 (idempotent)."""
    global _applied
    if _applied:
        return
    # FlexAttention's backward refuses to run on CPU unless compiled; with dynamo disabled it
    # runs eagerly. The variable is read when torch._dynamo's config is imported, so it is
    # also set on the config in case torch was imported before this point.
    os.environ["TORCHDYNAMO_DISABLE"] = "1"
    # Everything is local: datasets/hub must never try the network.
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    # Keep each rank from claiming every core (2 ranks per host on small machines).
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import torch
    import torch._dynamo.config
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _set_pg_timeout
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives

    torch._dynamo.config.disable = True
    # ...and then FlexAttention warns on every rank that it runs unfused: expected here.
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

    # torchtitan calls `torch.distributed.set_timeout(timeout, group)` after the first step;
    # torch 2.13 names that function `_set_pg_timeout`.
    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = _set_pg_timeout  # type: ignore[attr-defined]

    # FSDP divides gradients with ReduceOp.AVG / PREMUL_SUM inside reduce-scatter, which gloo
    # does not implement. `force_sum_reduction_for_comms` makes it reduce with SUM and divide
    # afterwards (the same result); we force it for gloo groups only.
    original_factors = _fsdp_collectives._get_gradient_divide_factors

    def gradient_divide_factors(reduce_scatter_group: Any, all_reduce_group: Any,
                                reduce_dtype: Any, device_type: str = "",
                                factor: float | None = None,
                                force_sum_reduction_for_comms: bool = False) -> Any:
        group = reduce_scatter_group or all_reduce_group
        if group is not None and dist.get_backend(group) == "gloo":
            force_sum_reduction_for_comms = True
        return original_factors(reduce_scatter_group, all_reduce_group, reduce_dtype,
                                device_type, factor, force_sum_reduction_for_comms)

    _fsdp_collectives._get_gradient_divide_factors = gradient_divide_factors

    # The debug model attends with FlexAttention, whose input check refuses CPU tensors that
    # need gradients because the *compiled* CPU kernel has no backward. With dynamo disabled
    # (above) FlexAttention runs its eager reference implementation, which autograd
    # differentiates, so the check is skipped for CPU and kept for every other device.
    from torch.nn.attention import flex_attention as flex

    validate_device = flex._validate_device

    def validate_device_allowing_cpu(query: Any, key: Any, value: Any) -> None:
        if query.device.type != "cpu":
            validate_device(query, key, value)

    flex._validate_device = validate_device_allowing_cpu

    # torchtitan picks its device once, at import of torchtitan.tools.utils: with no
    # accelerator it still answers "cuda". Every other torchtitan module copies
    # `device_type`/`device_module` from there when imported, so they are replaced before
    # the trainer is imported: "cpu" selects gloo, the stand-in answers the memory calls.
    trainer_loaded = "torchtitan.trainer" in sys.modules
    from torchtitan.tools import utils as titan_utils

    if trainer_loaded and titan_utils.device_type != "cpu":
        raise RuntimeError(
            "torchtitan.trainer was imported before cpu_launch.apply_cpu_adaptations(); "
            "call it first so torchtitan picks the CPU device."
        )
    titan_utils.device_type = "cpu"
    titan_utils.device_module = _CpuDeviceModule()
    _install_step_hook()
    _applied = True


def _install_step_hook() -> None:
    """Turn each metrics log of torchtitan's trainer into a `step_reports` record.

    `Trainer.forward_backward_step` returns this rank's loss sum divided by the global token
    count; scaled back by global/local valid tokens it is this rank's own mean loss.
    `MetricsProcessor.log` is called once per logged step with the global figures.
    """
    import torch
    from torchtitan.components.loss import IGNORE_INDEX
    from torchtitan.components.metrics import MetricsProcessor
    from torchtitan.trainer import Trainer

    local = {"loss": 0.0, "since": time.perf_counter()}
    forward_backward_step = Trainer.forward_backward_step
    log = MetricsProcessor.log

    def hooked_forward_backward_step(self: Any, *, input_dict: Any, labels: Any,
                                     global_valid_tokens: Any) -> Any:
        loss = forward_backward_step(self, input_dict=input_dict, labels=labels,
                                     global_valid_tokens=global_valid_tokens)
        if isinstance(labels, torch.Tensor):
            valid = int((labels != IGNORE_INDEX).sum())
            local["loss"] += float(loss.detach()) * int(global_valid_tokens) / max(valid, 1)
        return loss

    def hooked_log(self: Any, step: int, global_avg_loss: float, global_max_loss: float,
                   grad_norm: float, extra_metrics: Any = None) -> None:
        log(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics)
        now = time.perf_counter()
        step_reports.publish({
            "rank": int(os.environ.get("RANK", "0")),
            "pid": os.getpid(),
            "step": int(step),
            "loss": local["loss"],
            "global_avg_loss": float(global_avg_loss),
            "grad_norm": float(grad_norm),
            "step_s": now - local["since"],
            "rss_peak_gib": rss_peak_bytes() / 2**30,
        })
        local["loss"] = 0.0
        local["since"] = now

    def hooked_train(self: Any) -> None:
        local["loss"], local["since"] = 0.0, time.perf_counter()
        train(self)

    train = Trainer.train
    Trainer.forward_backward_step = hooked_forward_backward_step  # type: ignore[method-assign]
    MetricsProcessor.log = hooked_log  # type: ignore[method-assign]
    Trainer.train = hooked_train  # type: ignore[method-assign]


def train_args(args: Sequence[str], assets_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """The full torchtitan argument list: defaults, local assets, then `args`."""
    assets = ensure_assets(assets_dir)
    return [
        *DEFAULT_ARGS,
        "--hf_assets_path", str(assets / "tokenizer"),
        "--dataloader.dataset_path", str(assets / "dataset"),
        *args,
    ]


def main(args: Sequence[str] | None = None) -> None:
    """Adapt, then run `torchtitan.train.main()` with `train_args(args)` as its argv."""
    _set_torchrun_defaults()
    argv = train_args(sys.argv[1:] if args is None else args)
    apply_cpu_adaptations()
    from torchtitan import train

    saved = sys.argv
    sys.argv = ["torchtitan.train", *argv]
    try:
        train.main()
    finally:
        sys.argv = saved


if __name__ == "__main__":
    # Run through the importable module, not this `__main__` copy: runpy gives every in-process
    # run (monarch.spmd) fresh globals, and the adaptations must be applied once per process.
    from cookbook.torchtitan import cpu_launch

    cpu_launch.main()
