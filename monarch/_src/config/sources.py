"""The two layers read from outside the program: a TOML config file and the environment.

Both are read whole, validated whole, and fail loudly: a misspelt key in the file or a malformed
environment variable is a `ValueError` naming the file or variable, never a silently ignored
setting. (Rejected alternative: warn and fall back to the default, which hides typos in exactly
the settings people reach for when something is already wrong.)

The file is named by `MONARCH_CONFIG_FILE` and holds the keys at its top level:

    default_transport = "tcp"
    cleanup_timeout = "5s"
    remote_alloc_allowed_port_range = [26600, 26610]

Reading it needs `tomllib` (Python 3.11+); on 3.10 naming a file is an error instead.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import ModuleType

from monarch._src.config.registry import KEYS, unknown_key_error
from monarch._src.config.validate import parse_text, parse_toml

__all__ = ["CONFIG_FILE_ENV", "read_config_file", "read_environment"]

CONFIG_FILE_ENV = "MONARCH_CONFIG_FILE"


def read_environment(environ: Mapping[str, str]) -> dict[str, object]:
    """Return the environment layer: for each key, the first of its variables that is set."""
    layer: dict[str, object] = {}
    for key in KEYS.values():
        for var in key.env_names:
            text = environ.get(var)
            if text is None:
                continue
            try:
                layer[key.name] = parse_text(key, text)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"Environment variable {var}={text!r} is invalid. {exc} "
                    f"Fix or unset {var}."
                ) from exc
            break
    return layer


def _import_tomllib() -> ModuleType | None:
    """Return the tomllib module, or None on Python 3.10 where it does not exist."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    return None


def read_config_file(environ: Mapping[str, str]) -> dict[str, object]:
    """Return the config-file layer, empty when `MONARCH_CONFIG_FILE` is unset or empty."""
    path = environ.get(CONFIG_FILE_ENV, "").strip()
    if not path:
        return {}
    toml = _import_tomllib()
    if toml is None:
        raise RuntimeError(
            f"{CONFIG_FILE_ENV} names {path!r}, but reading TOML config files needs Python 3.11+. "
            f"Unset {CONFIG_FILE_ENV} and use environment variables or monarch.config.configure()."
        )
    try:
        with open(path, "rb") as handle:
            document: dict[str, object] = toml.load(handle)
    except OSError as exc:
        raise ValueError(
            f"Cannot read the config file {path!r} named by {CONFIG_FILE_ENV}: {exc}."
        ) from exc
    except toml.TOMLDecodeError as exc:
        raise ValueError(f"The config file {path!r} is not valid TOML: {exc}.") from exc
    layer: dict[str, object] = {}
    for name, raw in document.items():
        key = KEYS.get(name)
        if key is None:
            raise ValueError(f"In config file {path!r}: {unknown_key_error(name)}")
        try:
            layer[name] = parse_toml(key, raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"In config file {path!r}: {exc}") from exc
    return layer
