"""A pytest plugin (``-p pytest_shim``) that installs the name-only shim before any test module is imported."""

from __future__ import annotations

import shim

shim.install(placeholders=True)  # a missing name fails the tests that use it, not its whole module
