"""Each Python block of the README and of docs/*.md runs on its own, in a fresh interpreter, and prints what it shows.

The convention README.md and every page of docs/ follow, and this module enforces:

- Every fenced block names its language (```python, ```text, ```sh, ```console, ...). A fence may be indented (a
  block inside a list item): its lines are read without that indentation.
- A ```python block runs by itself: it is written to ``example.py`` in an empty directory outside the repository and
  run there by a fresh interpreter, with a user's environment (``PATH``, an empty ``HOME``, the package importable)
  and nothing else but what :data:`SERVICES` gives a block that names it (the tests' own Redis server; the region
  Lambda sets, for a block that builds a DynamoDB store).
- The ```text block right after it (one blank line between) is everything it prints: standard output and standard
  error (log lines, warnings), interleaved as in a terminal. A block with no such ```text block prints nothing.
- A block that is not meant to run by itself (a template naming classes of yours, another library's code) follows
  the line ``<!-- not run (the reason) -->``. It must still compile, and shows no output.

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
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```$", re.DOTALL | re.MULTILINE)
NOT_RUN = re.compile(r"<!-- not run \(.+\) -->\n[ ]*\Z")
OUTPUT = re.compile(
    r"\n\n(?P<indent>[ ]*)```text\n(.*?)^(?P=indent)```$", re.DOTALL | re.MULTILINE
)  # where a block ends
LANGUAGES = {"python", "text", "sh", "console", "yaml", "json", "toml"}
#: Environment variables a block gets only when its code names the word, and what each is (a fixture's value).
SERVICES = {
    "REDIS_URL": ("REDIS_URL", lambda request: request.getfixturevalue("redis_server").url),
    # Lambda sets the region; a store is built at import time in a handler module, and boto3 needs one then.
    "AWS_DEFAULT_REGION": ("DynamoDBPersistenceLayer", lambda request: "eu-west-1"),
}


@dataclass(frozen=True)
class Block:
    document: str  # its file, relative to the repository
    line: int  # of the opening fence, 1-based
    heading: str
    code: str
    expected: str | None  # the ```text block after it; None: none follows
    runs: bool  # False: marked "not run"

    @property
    def id(self) -> str:
        page = "" if self.document == "README.md" else Path(self.document).stem + "-"
        return f"{page}line{self.line}-{re.sub(r'[^a-z0-9]+', '-', self.heading.lower()).strip('-')}"


def python_blocks(text: str, document: str = "README.md") -> list[Block]:
    """The document's Python blocks; every fence must name a known language."""
    blocks = []
    for fence in FENCE.finditer(text):
        info, line = fence["info"].strip(), text.count("\n", 0, fence.start()) + 1
        assert info in LANGUAGES, f"{document}:{line}: a fence must name its language, one of {sorted(LANGUAGES)}"
        before = text[: fence.start() + len(fence["indent"])]
        if info != "python":
            assert not NOT_RUN.search(before), f"{document}:{line}: only a python block can be marked not run"
            continue
        indent, output = fence["indent"], OUTPUT.match(text, fence.end())
        expected = None if output is None or output["indent"] != indent else _unindented(output[2], indent)
        headings = re.findall(r"^#+ (.+)$", before, re.MULTILINE)
        blocks.append(Block(document, line, headings[-1] if headings else "top", _unindented(fence["body"], indent),
                            expected, runs=not NOT_RUN.search(before)))  # fmt: skip
    return blocks


def _unindented(body: str, indent: str) -> str:
    """A fenced block's lines without the fence's own indentation (a blank line may have none)."""
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


BLOCKS = [b for d in DOCUMENTS for b in python_blocks(d.read_text(), d.relative_to(ROOT).as_posix())]


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
    services = {
        name: get(request) for name, (word, get) in SERVICES.items() if any(word in b.code for b in BLOCKS if b.runs)
    }
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        started = {}
        for block in (b for b in BLOCKS if b.runs):
            cwd = tmp_path_factory.mktemp(block.id)
            (cwd / "example.py").write_text(block.code)
            env = user_env(cwd, site, {k: v for k, v in services.items() if SERVICES[k][0] in block.code})
            started[block.id] = pool.submit(subprocess.run, [sys.executable, "example.py"], cwd=cwd, env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                            timeout=120)  # fmt: skip
        yield started


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=lambda b: b.id)
def test_each_python_block_runs_alone_and_prints_what_its_document_shows(block, runs):
    result = runs[block.id].result()
    assert result.returncode == 0, f"{block.document}:{block.line} failed on its own:\n{result.stdout}"
    assert result.stdout == (block.expected or ""), f"{block.document}:{block.line} printed something else"


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.runs], ids=lambda b: b.id)
def test_a_block_marked_not_run_compiles_and_shows_no_output(block):
    compile(block.code, f"{block.document}:{block.line}", "exec")
    assert block.expected is None, f"{block.document}:{block.line}: output shown for a block that is not run"


def test_the_convention_is_found_and_enforced():
    assert len([b for b in BLOCKS if b.runs]) >= 7
    assert len([b for b in BLOCKS if b.expected]) >= 7
    assert {b.document for b in BLOCKS} > {"README.md"}  # the pages of docs/ too
    # A block the convention does not cover fails: a fence without a language, a python block marked wrongly.
    with pytest.raises(AssertionError, match="must name its language"):
        python_blocks("```\nprint(1)\n```\n")
    with pytest.raises(AssertionError, match="only a python block"):
        python_blocks("<!-- not run (a shell command) -->\n```sh\nmake\n```\n")
    unmarked, marked = python_blocks(
        "```python\nprint(1)\n```\n\n```text\n1\n```\n\n<!-- not run (a template) -->\n```python\nx\n```\n"
    )
    assert (unmarked.runs, unmarked.expected, marked.runs, marked.expected) == (True, "1\n", False, None)
    # In a list item: the fence's indentation is not the code's, and a marker may stand at the item's indentation.
    listed, template = python_blocks(
        "1. Run:\n\n   ```python\n   if True:\n       print(2)\n   ```\n\n   ```text\n    2\n   ```\n\n"
        "   <!-- not run (a template) -->\n   ```python\n   x\n   ```\n",
        "docs/page.md",
    )
    assert (listed.code, listed.expected, listed.runs, listed.id) == (
        "if True:\n    print(2)\n",
        " 2\n",
        True,
        "page-line3-top",
    )
    assert (template.runs, template.code) == (False, "x\n")


def test_every_test_the_documents_name_exists():
    # The migration guide names Powertools' documentation examples the same way: the scenarios of bench/compat.
    scenarios = "".join(path.read_text() for path in ROOT.glob("bench/compat/*_examples.py"))
    examples = set(re.findall(r'@scenario\("\w+", "(test_\w+)"\)', scenarios))
    named = {d.relative_to(ROOT).as_posix(): set(re.findall(r"`(test_[a-z0-9_]+)`", d.read_text())) for d in DOCUMENTS}
    assert len(named["docs/guarantees.md"]) >= 30, "the Guarantees and limits page names its tests"
    defined = {
        m
        for path in [*ROOT.joinpath("tests").rglob("test_*.py"), *ROOT.glob("persistence/testing/_*.py")]
        for m in re.findall(r"def (test_\w+)", path.read_text())
    }
    assert {d: names - defined - examples for d, names in named.items() if names - defined - examples} == {}


def test_the_readme_is_a_first_screen_that_links_every_page():
    # The README is what PyPI and the repository show first: install, the batch handler, the guard, then links.
    lines = README.read_text().splitlines()
    assert len(lines) <= 300
    assert [n for n, line in enumerate(lines[:60]) if "pip install" in line]
    assert [n for n, line in enumerate(lines[:60]) if line.startswith(("make demo", "make test"))] != []
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Install", "## An SQS batch handler on DynamoDB", "## The guard on its own",
                        "## The decorators", "## Documentation"]  # fmt: skip
    handler = README.read_text().split("\n## An SQS batch handler on DynamoDB\n", 1)[1].split("\n## ", 1)[0]
    for action in ("PutItem", "UpdateItem", "DeleteItem", "GetItem"):
        assert f"`dynamodb:{action}`" in handler
    assert "`id` (String)" in handler
    assert "TTL on `expiration`" in handler
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"/blob/main/docs/([a-z-]+\.md)", README.read_text()))
    assert pages - linked == set(), "a page the README's table does not link"
