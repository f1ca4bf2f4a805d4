"""The current job of a project directory: named contexts under `.monarch/`.

A context is a directory `.monarch/contexts/<name>/` holding `spec` (the job spec as
`module.attr` or `path.py:attr`) and, once applied, `job_state.pkl`; the "default" context keeps
its applied job at `DEFAULT_JOB_PATH` (`.monarch/job_state.pkl`), where a script's own
`job.state()` finds it. `.monarch/current` names the context in use ("default" until
`monarch context use` changes it).
"""

from __future__ import annotations

import importlib
import os
import runpy
import shutil
from typing import Any

from monarch._src.job.job import JobTrait

__all__ = [
    "context_dir",
    "current_context",
    "job_path",
    "list_contexts",
    "load_current_job",
    "load_job_spec",
    "remove_context",
    "set_current_job",
    "use_context",
]

DEFAULT_CONTEXT = "default"


def _root(root: str | None) -> str:
    return root or ".monarch"


def current_context(root: str | None = None) -> str:
    """The name of the context in use."""
    try:
        with open(os.path.join(_root(root), "current")) as f:
            return f.read().strip() or DEFAULT_CONTEXT
    except FileNotFoundError:
        return DEFAULT_CONTEXT


def context_dir(name: str | None = None, root: str | None = None) -> str:
    """The directory of context `name` (default: the current one)."""
    name = name or current_context(root)
    if not name.replace("-", "_").isidentifier():
        raise ValueError(f"Context name {name!r} must be letters, digits, '_' or '-'.")
    return os.path.join(_root(root), "contexts", name)


def job_path(name: str | None = None, root: str | None = None) -> str:
    """Where the applied job of context `name` (default: the current one) is kept."""
    name = name or current_context(root)
    if name == DEFAULT_CONTEXT:
        return os.path.join(_root(root), "job_state.pkl")
    return os.path.join(context_dir(name, root), "job_state.pkl")


def load_job_spec(spec: str) -> JobTrait:
    """Import a job from `module.attr` or `path.py:attr` (a callable is called with no args)."""
    if ":" in spec:
        path, attr = spec.rsplit(":", 1)
        namespace = runpy.run_path(path)
        if attr not in namespace:
            raise AttributeError(f"{path!r} defines no {attr!r}; job spec {spec!r} is wrong.")
        obj = namespace[attr]
    else:
        module, _, attr = spec.rpartition(".")
        if not module:
            raise ValueError(
                f"Job spec {spec!r} must be 'module.attr' or 'path.py:attr', e.g. "
                "'myproject.jobs.train_job'."
            )
        obj = getattr(importlib.import_module(module), attr)
    if callable(obj) and not isinstance(obj, JobTrait):
        obj = obj()
    if not isinstance(obj, JobTrait):
        raise TypeError(f"Job spec {spec!r} gave a {type(obj).__name__}, not a JobTrait.")
    return obj


def set_current_job(module_path: str, context: str | None = None, root: str | None = None) -> None:
    """Record `module_path` as the job spec of `context` (default: the current context)."""
    load_job_spec(module_path)  # fail now, not at the next `monarch exec`
    d = context_dir(context, root)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "spec"), "w") as f:
        f.write(module_path + "\n")


def load_current_job(context: str | None = None, root: str | None = None) -> JobTrait:
    """The current context's job: its applied state if there is one, else a fresh spec."""
    d = context_dir(context, root)
    cached = job_path(context, root)
    if os.path.exists(cached):
        from monarch._src.job.job import job_load

        return job_load(cached)
    try:
        with open(os.path.join(d, "spec")) as f:
            spec = f.read().strip()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"Context {os.path.basename(d)!r} has no job. Run `monarch apply module.attr` or "
            "`monarch context create NAME module.attr` first."
        ) from None
    return load_job_spec(spec)


def use_context(name: str, root: str | None = None) -> None:
    """Make `name` the current context (it must exist)."""
    d = context_dir(name, root)
    if not os.path.isdir(d):
        raise FileNotFoundError(f"No context {name!r}. Known: {list_contexts(root)}.")
    with open(os.path.join(_root(root), "current"), "w") as f:
        f.write(name + "\n")


def list_contexts(root: str | None = None) -> list[str]:
    """The names of the contexts that exist."""
    base = os.path.join(_root(root), "contexts")
    return sorted(os.listdir(base)) if os.path.isdir(base) else []


def remove_context(name: str, root: str | None = None) -> Any:
    """Delete context `name`, killing its job if it runs; the current context falls back."""
    d = context_dir(name, root)
    if not os.path.isdir(d):
        raise FileNotFoundError(f"No context {name!r}. Known: {list_contexts(root)}.")
    cached = job_path(name, root)
    if os.path.exists(cached):
        from monarch._src.job.job import job_load

        job = job_load(cached)
        if job.active:
            job.kill()
        os.remove(cached)
    shutil.rmtree(d)
    if current_context(root) == name:
        os.remove(os.path.join(_root(root), "current"))
