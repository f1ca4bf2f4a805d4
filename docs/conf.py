"""Sphinx configuration: the guides (Markdown, through MyST) and the API reference (autodoc).

Built by `make docs`; `tests/docs/test_api_reference.py` builds it with warnings as errors.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
# Building the reference imports the package; it must not start the zygote.
os.environ.setdefault("MONARCH_PRESTART", "0")

project = "monarch-dask"
author = "the monarch-dask authors"
extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
autodoc_default_options = {"members": True, "undoc-members": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
# Docstrings use Markdown-style `code` spans; render single backticks as code.
default_role = "code"
myst_heading_anchors = 3
html_theme = "alabaster"
suppress_warnings = ["myst.header"]
