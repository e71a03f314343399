"""Reliability figures: each scenario reports its counts; the session prints them as one table."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

_ROWS: list[dict[str, Any]] = []
COLUMNS = ("scenario", "records", "deliveries", "duplicates", "faults", "double_effects", "lost")


@pytest.fixture
def report(request):
    """Call ``report(**figures)`` once per scenario; the figures are printed at the end of the run."""

    def add(**figures: Any) -> None:
        _ROWS.append({"scenario": request.node.name, **figures})

    return add


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _ROWS:
        return
    terminalreporter.section("reliability figures")
    widths = {c: max(len(c), *(len(str(r.get(c, "-"))) for r in _ROWS)) for c in COLUMNS}
    terminalreporter.write_line("  ".join(c.ljust(widths[c]) for c in COLUMNS))
    for row in _ROWS:
        terminalreporter.write_line("  ".join(str(row.get(c, "-")).ljust(widths[c]) for c in COLUMNS))
    target = os.environ.get("RELIABILITY_REPORT")
    if target:
        Path(target).write_text(json.dumps(_ROWS, indent=2), encoding="utf-8")


#: ``RELIABILITY_SIZE=long`` or ``short`` picks a scenario's size; unset, a run given only paths inside this
#: directory (``make reliability``) is long and any other run (``make test``, the whole suite) is short.
SIZE_VARIABLE = "RELIABILITY_SIZE"


def _long_form(config: pytest.Config) -> bool:
    chosen = os.environ.get(SIZE_VARIABLE, "").strip().lower()
    if chosen in {"long", "short"}:
        return chosen == "long"
    if chosen:
        raise pytest.UsageError(f"{SIZE_VARIABLE} must be 'long' or 'short', not {chosen!r}")
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        return False
    here = Path(__file__).parent.resolve()
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    return bool(paths) and all(path == here or here in path.parents for path in paths)


@pytest.fixture(scope="session")
def long_form(pytestconfig: pytest.Config) -> bool:
    """Whether scenarios run at their long size (``make reliability``) or their short one (``make test``)."""
    return _long_form(pytestconfig)
