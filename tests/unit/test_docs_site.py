"""The documentation site builds as `make docs` builds it (--strict), with an API reference of every public name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import consumer
import persistence

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # --strict, as mkdocs.yml says too: a warning (a broken link, a page out of the nav, a docstring) fails it.
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", ROOT / "mkdocs.yml",
                             "--site-dir", out], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    return out


def test_every_page_of_docs_is_built(site):
    pages = [p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")]
    built = [site / ("" if p.name == "index" else p) / "index.html" for p in pages]
    assert [p for p, html in zip(pages, built, strict=True) if not html.exists()] == []
    assert len(pages) >= 5


@pytest.mark.parametrize("package", [consumer, persistence], ids=lambda p: p.__name__)
def test_the_api_reference_documents_every_public_name_from_its_docstring(site, package):
    pages = {name: (site / "reference" / name / "index.html").read_text() for name in ("consumer", "persistence")}
    # A name consumer re-exports from persistence (its errors) is documented where it is defined.
    home = {name: "persistence" if getattr(persistence, name, None) is getattr(package, name) else package.__name__
            for name in package.__all__}  # fmt: skip
    assert [name for name in package.__all__ if f'id="{home[name]}.{name}"' not in pages[home[name]]] == []
    documented = package.IdempotencyGuard if package is consumer else package.IdempotencyRecord
    assert documented.__doc__.split("\n")[0] in pages[package.__name__]  # the docstring's own words
    # A constant's `#:` comment is its docstring.
    assert "The environment variable a store URL is read from when none is given." in pages["persistence"]
