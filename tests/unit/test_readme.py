"""Each Python block of the README (and of the guides in docs/) runs on its own, in a fresh interpreter, and prints
what the document shows.

The convention README.md and docs/*.md follow, and this module enforces:

- Every fenced block names its language (```python, ```text, ```sh, ```console, ...).
- A ```python block runs by itself: it is written to ``example.py`` in an empty directory outside the repository and
  run there by a fresh interpreter, with a user's environment (``PATH``, an empty ``HOME``, the package importable)
  and nothing else but ``REDIS_URL`` for a block that reads it (the tests' own Redis server).
- The ```text block right after it (one blank line between) is everything it prints: standard output and standard
  error (log lines, warnings), interleaved as in a terminal. A block with no such ```text block prints nothing.
- A block that is not meant to run by itself (a template naming classes of yours) follows the line
  ``<!-- readme: not run (the reason) -->``. It must still compile, and shows no output.

The blocks run in parallel (each is mostly an interpreter starting and importing), and each is its own test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)
NOT_RUN = re.compile(r"<!-- readme: not run \(.+\) -->\n\Z")
OUTPUT = re.compile(r"\n\n```text\n(.*?)^```$", re.DOTALL | re.MULTILINE)  # matched where a block ends
LANGUAGES = {"python", "text", "sh", "console", "yaml", "json", "toml"}
#: Environment variables a block gets only when its code names them, and the fixture that provides each.
SERVICES = {"REDIS_URL": lambda request: request.getfixturevalue("redis_server").url}


@dataclass(frozen=True)
class Block:
    document: str  # README.md, docs/....md
    line: int  # of the opening fence, 1-based
    heading: str
    code: str
    expected: str | None  # the ```text block after it; None: none follows
    runs: bool  # False: marked "not run"

    @property
    def id(self) -> str:
        place = "" if self.document == "README.md" else f"{Path(self.document).stem}-"
        return f"{place}line{self.line}-{re.sub(r'[^a-z0-9]+', '-', self.heading.lower()).strip('-')}"

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def python_blocks(text: str, document: str = "README.md") -> list[Block]:
    """A document's Python blocks; every fence must name a known language."""
    blocks = []
    for fence in FENCE.finditer(text):
        info, line = fence["info"].strip(), text.count("\n", 0, fence.start()) + 1
        assert info in LANGUAGES, f"{document}:{line}: a fence must name its language, one of {sorted(LANGUAGES)}"
        before = text[: fence.start()]
        if info != "python":
            assert not NOT_RUN.search(before), f"{document}:{line}: only a python block can be marked not run"
            continue
        output = OUTPUT.match(text, fence.end())
        headings = re.findall(r"^#+ (.+)$", before, re.MULTILINE)
        blocks.append(Block(document, line, headings[-1] if headings else "top", fence["body"], output and output[1],
                            runs=not NOT_RUN.search(before)))  # fmt: skip
    return blocks


BLOCKS = [block for path in DOCUMENTS for block in python_blocks(path.read_text(), str(path.relative_to(ROOT)))]


def user_env(home: Path, site: Path, services: dict[str, str]) -> dict[str, str]:
    """What a user's shell has: PATH, locale, a HOME of its own; the package importable as if installed."""
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT"}}
    # Unbuffered, so standard output and standard error interleave as they do in a terminal.
    return {**env, "HOME": str(home), "PYTHONPATH": str(site), "PYTHONUNBUFFERED": "1", **services}


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Every runnable block, started at once on a small pool; each test waits for its own."""
    site = tmp_path_factory.mktemp("site")  # only our two packages, as an installed distribution has them
    for package in ("consumer", "persistence"):
        (site / package).symlink_to(ROOT / package, target_is_directory=True)
    services = {name: get(request) for name, get in SERVICES.items() if any(name in b.code for b in BLOCKS if b.runs)}
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        started = {}
        for block in (b for b in BLOCKS if b.runs):
            cwd = tmp_path_factory.mktemp(block.id)
            (cwd / "example.py").write_text(block.code)
            env = user_env(cwd, site, {k: v for k, v in services.items() if k in block.code})
            started[block.id] = pool.submit(subprocess.run, [sys.executable, "example.py"], cwd=cwd, env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                            timeout=120)  # fmt: skip
        yield started


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=lambda b: b.id)
def test_each_python_block_runs_alone_and_prints_what_the_readme_shows(block, runs):
    result = runs[block.id].result()
    assert result.returncode == 0, f"{block.where} failed on its own:\n{result.stdout}"
    assert result.stdout == (block.expected or ""), f"{block.where} printed something else"


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.runs], ids=lambda b: b.id)
def test_a_block_marked_not_run_compiles_and_shows_no_output(block):
    compile(block.code, block.where, "exec")
    assert block.expected is None, f"{block.where}: output shown for a block that is not run"


def test_the_convention_is_found_and_enforced():
    assert len([b for b in BLOCKS if b.runs]) >= 7
    assert len([b for b in BLOCKS if b.expected]) >= 7
    # A block the convention does not cover fails: a fence without a language, a python block marked wrongly.
    with pytest.raises(AssertionError, match="must name its language"):
        python_blocks("```\nprint(1)\n```\n")
    with pytest.raises(AssertionError, match="only a python block"):
        python_blocks("<!-- readme: not run (a shell command) -->\n```sh\nmake\n```\n")
    unmarked, marked = python_blocks(
        "```python\nprint(1)\n```\n\n```text\n1\n```\n\n<!-- readme: not run (a template) -->\n```python\nx\n```\n"
    )
    assert (unmarked.runs, unmarked.expected, marked.runs, marked.expected) == (True, "1\n", False, None)


#: Names of Powertools' documented examples the migration guide's drop-in table lists: not tests of ours.
POWERTOOLS_EXAMPLES = {"test_disabling_idempotency_utility", "test_with_dynamodb_local", "test_with_io_operations"}


def test_every_test_the_readme_names_exists():
    named = {test for path in DOCUMENTS for test in re.findall(r"`(test_[a-z0-9_]+)`", path.read_text())}
    named -= POWERTOOLS_EXAMPLES
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
