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
