"""Sphinx configuration of the pytest-agent-evalset documentation (MyST Markdown pages).

Built in CI with warnings as errors: ``python -m sphinx -W --keep-going -b html docs
docs/_build/html``.
"""

from __future__ import annotations

import importlib.metadata

project = "pytest-agent-evalset"
author = "the pytest-agent-evalset authors"
copyright = "2026, the pytest-agent-evalset authors"
release = importlib.metadata.version("pytest-agent-evalset")
version = release

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "conftest.py"]
myst_heading_anchors = 4  # `page.md#a-heading` links, as on GitHub
myst_enable_extensions = ["colon_fence"]
html_theme = "alabaster"
html_title = "pytest-agent-evalset"
suppress_warnings: list[str] = []
