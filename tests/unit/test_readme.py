"""The README's Python blocks run as written, and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```(?:\n\n```text\n(.*?)```)?", re.DOTALL)


def test_readme_examples_run_and_print_what_they_claim(tmp_path, monkeypatch, redis_server):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    blocks = BLOCK.findall(README.read_text())
    assert sum(1 for _, expected in blocks if expected) >= 2, "the README's output blocks were not found"
    namespace: dict[str, object] = {}
    for code, expected in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - our own README
        if expected:
            assert out.getvalue() == expected


def test_every_test_the_readme_names_exists():
    named = set(re.findall(r"`(test_[a-z0-9_]+)`", README.read_text()))
    assert len(named) >= 30, "the Guarantees and limits section names its tests"
    defined = {
        m
        for path in [
            *README.parent.joinpath("tests").rglob("test_*.py"),
            *README.parent.glob("persistence/testing/_*.py"),
        ]
        for m in re.findall(r"def (test_\w+)", path.read_text())
    }
    assert named - defined == set()
