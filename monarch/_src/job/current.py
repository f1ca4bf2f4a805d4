"""The current job of a project directory: named contexts under `.monarch/`, as torchmonarch lays
them out.

A context is a directory `.monarch/<name>/` holding `spec` (the job spec as `module.attr` or
`path.py:attr`) and, once applied, `state.pkl`. `.monarch/job_state.pkl` (`DEFAULT_JOB_PATH`, where
a script's own `job.state()` finds the job) is a symlink to the current context's `state.pkl`;
while it is a plain file (or absent), the current context is "default". `monarch context use`
first moves a plain `job_state.pkl` into `default/state.pkl`, then points the link at the chosen
context; removing the current context points it back at `default/state.pkl`.
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
    "create_context",
    "current_context",
    "job_path",
    "list_contexts",
    "load_current_job",
    "load_job_spec",
    "recorded_spec",
    "remove_context",
    "set_current_job",
    "use_context",
]

DEFAULT_CONTEXT = "default"
_STATE = "state.pkl"  # a context's applied job, in its directory
_LINK = "job_state.pkl"  # the current context's applied job, a symlink into it
# Directories of `.monarch/` that are not contexts (batch clients' logs).
_NOT_CONTEXTS = frozenset({"logs"})


def _root(root: str | None) -> str:
    return root or ".monarch"


def _check_name(name: str) -> str:
    if not name.replace("-", "_").isidentifier() or name in _NOT_CONTEXTS:
        raise ValueError(f"Context name {name!r} must be letters, digits, '_' or '-' (and not "
                         f"{', '.join(sorted(_NOT_CONTEXTS))}).")
    return name


def current_context(root: str | None = None) -> str:
    """The name of the context in use: where `.monarch/job_state.pkl` links to, else "default"."""
    link = os.path.join(_root(root), _LINK)
    if os.path.islink(link):
        parts = os.path.normpath(os.readlink(link)).split(os.sep)
        if len(parts) == 2 and parts[1] == _STATE:
            return parts[0]
    return DEFAULT_CONTEXT


def context_dir(name: str | None = None, root: str | None = None) -> str:
    """The directory of context `name` (default: the current one)."""
    return os.path.join(_root(root), _check_name(name or current_context(root)))


def job_path(name: str | None = None, root: str | None = None) -> str:
    """Where the applied job of context `name` (default: the current one) is kept: the current
    context's through `job_state.pkl` (the link, or the plain file of a project without contexts
    yet), another's in its directory."""
    if name is None or name == current_context(root):
        return os.path.join(_root(root), _LINK)
    return os.path.join(context_dir(name, root), _STATE)


def _link_to(root: str | None, name: str) -> None:
    """Point `job_state.pkl` at context `name`'s state (a plain file moves to "default" first)."""
    base = _root(root)
    link = os.path.join(base, _LINK)
    os.makedirs(os.path.join(base, name), exist_ok=True)
    if os.path.lexists(link) and not os.path.islink(link):
        os.makedirs(os.path.join(base, DEFAULT_CONTEXT), exist_ok=True)
        os.replace(link, os.path.join(base, DEFAULT_CONTEXT, _STATE))
    tmp = f"{link}.{os.getpid()}.tmp"
    os.symlink(os.path.join(name, _STATE), tmp)  # relative: `.monarch/` may move
    os.replace(tmp, link)


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
    """Record `module_path` as the job spec of `context` (default: the current context).

    As on torchmonarch, `job_state.pkl` becomes the link to the current context's state first
    (a plain file moves into the "default" context)."""
    load_job_spec(module_path)  # fail now, not at the next `monarch exec`
    here = current_context(root)
    if not os.path.islink(os.path.join(_root(root), _LINK)):
        _link_to(root, here)
    d = context_dir(context or here, root)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "spec"), "w") as f:
        f.write(module_path + "\n")


def recorded_spec(context: str | None = None, root: str | None = None) -> str | None:
    """The job spec recorded for `context` (default: the current one), None if none is."""
    try:
        with open(os.path.join(context_dir(context, root), "spec")) as f:
            return f.read().strip() or None
    except FileNotFoundError:
        return None


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


def create_context(name: str, spec: str | None = None, root: str | None = None) -> None:
    """Create context `name` (its directory), recording `spec` as its job spec when given."""
    os.makedirs(context_dir(name, root), exist_ok=True)
    if spec is not None:
        set_current_job(spec, context=name, root=root)


def use_context(name: str, root: str | None = None) -> None:
    """Make `name` the current context, creating it if needed (as torchmonarch does)."""
    _link_to(root, _check_name(name))


def list_contexts(root: str | None = None) -> list[str]:
    """The names of the contexts that exist (the directories of `.monarch/`)."""
    base = _root(root)
    if not os.path.isdir(base):
        return []
    return sorted(n for n in os.listdir(base)
                  if n not in _NOT_CONTEXTS and os.path.isdir(os.path.join(base, n)))


def remove_context(name: str, root: str | None = None) -> Any:
    """Delete context `name`, killing its job if it runs; when it was the current one,
    `job_state.pkl` links back to the "default" context."""
    d = context_dir(name, root)
    if not os.path.isdir(d):
        raise FileNotFoundError(f"No context {name!r}. Known: {list_contexts(root)}.")
    was_current = os.path.islink(os.path.join(_root(root), _LINK)) and (
        current_context(root) == name)
    cached = os.path.join(d, _STATE)
    if os.path.exists(cached):
        from monarch._src.job.job import job_load

        job = job_load(cached)
        if job.active:
            job.kill()
    shutil.rmtree(d)
    if was_current:
        _link_to(root, DEFAULT_CONTEXT)
