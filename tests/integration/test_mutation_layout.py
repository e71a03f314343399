"""``make mutation``'s test selection passes, unmutated, in the tree mutmut builds, and its configuration names
only files that exist.

mutmut copies ``[tool.mutmut]``'s ``source_paths``, ``tests/``, ``pyproject.toml`` and ``also_copy`` into
``mutants/``, rewrites each module of ``only_mutate`` with every mutant behind a trampoline, and runs the
selection there: its first step, the stats run, stops the whole run at a failing test. A test added to the
selection that needs something else (a file of the repository, the benchmark's venv, the unmutated source for
a type checker) fails here, in ``make test``, instead.

The tree is built by mutmut's own steps, in a temporary copy of what it reads; the selection runs there as
mutmut's stats run runs it (no mutant active, the trampolines counting calls), with Hypothesis drawing one
example a test. An ``only_mutate`` entry that matches no file would leave its module unmutated, and a
``--deselect`` of a test that moved would deselect nothing: both fail by name.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

configuration = pytest.importorskip("mutmut.configuration", reason="mutmut is installed by make install (dev)")
file_utils = pytest.importorskip("mutmut.utils.file_utils")

ROOT = Path(__file__).resolve().parents[2]

#: Builds mutants/ as ``mutmut run`` does before its stats run (cwd: the copy of what mutmut reads).
BUILD = """
import os
from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants
from mutmut.mutation.trampoline import set_mutant_under_test
set_mutant_under_test("mutant_generation")
copy_src_dir()
copy_also_copy_files()
create_mutants(os.cpu_count() or 1)
"""

#: A pytest plugin: one example a Hypothesis test, its own ``@settings`` too (kept by Hypothesis on the test
#: function), since what a test needs of the tree does not depend on the example.
ONE_EXAMPLE = """
from hypothesis import settings

settings.register_profile("layout", parent=settings.get_profile("ci"), max_examples=1)


def pytest_collection_modifyitems(items):
    for item in items:
        test = getattr(item, "obj", None)
        chosen = getattr(test, "_hypothesis_internal_use_settings", None)
        if chosen is not None:
            test._hypothesis_internal_use_settings = settings(chosen, max_examples=1)
"""


@pytest.fixture(scope="module")
def mutmut_config():
    """``[tool.mutmut]`` as mutmut reads it (from the working directory), with its default ``also_copy``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        configuration.reset_config()
        try:
            yield configuration.config(), sorted(map(str, file_utils.walk_source_files()))
        finally:
            configuration.reset_config()


def test_only_mutate_names_existing_modules_of_the_source_paths(mutmut_config):
    config, sources = mutmut_config
    assert config.only_mutate, "only_mutate is empty: mutmut would mutate every module"
    for pattern in config.only_mutate:
        assert any(fnmatch.fnmatch(path, pattern) for path in sources), (
            f"only_mutate names {pattern!r}, which matches no module of {[str(p) for p in config.source_paths]}: "
            "mutmut would leave it unmutated without a word (moved? name its new path)"
        )


def defined_names(path: Path) -> set[str]:
    """The names of the classes and functions ``path`` defines, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}


def test_the_selection_names_existing_tests(mutmut_config):
    config, sources = mutmut_config
    selection = config.pytest_add_cli_args_test_selection
    keywords = {selection[i + 1] for i, arg in enumerate(selection[:-1]) if arg == "-k"}
    inherited = set().union(*(defined_names(ROOT / path) for path in sources))  # persistence.testing's contract
    for arg in selection:
        if arg in keywords or arg == "-k":
            continue
        option, _, target = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        path, _, test = target.partition("::")
        assert (ROOT / path).exists(), f"{arg}: {path} does not exist"
        if option == "--deselect":
            first, *rest = test.split("::")
            assert first in defined_names(ROOT / path), f"{arg}: no such test, so it deselects nothing"
            assert set(rest) <= defined_names(ROOT / path) | inherited, f"{arg}: no such test, so it deselects nothing"


@pytest.mark.slow
def test_the_selection_passes_unmutated_in_the_tree_mutmut_builds(mutmut_config, tmp_path):
    config, sources = mutmut_config
    repository = tmp_path / "repository"  # what mutmut reads: it builds mutants/ inside
    for path in (*config.source_paths, *config.also_copy):
        source = ROOT / path
        if source.is_dir():
            shutil.copytree(source, repository / path, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif source.is_file():
            (repository / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repository / path)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MUTANT_UNDER_TEST"}}  # a fresh clone's
    subprocess.run([sys.executable, "-c", BUILD], cwd=repository, env=env, check=True, capture_output=True)
    mutants = repository / "mutants"
    mutated = [path for path in sources if config.should_mutate(path)]
    assert mutated
    assert [path for path in mutated if "@_mutmut_mutated(" not in (mutants / path).read_text()] == []
    (mutants / "one_example.py").write_text(textwrap.dedent(ONE_EXAMPLE))

    # As mutmut's stats run: pytest in mutants/, that directory first on sys.path, the trampolines counting calls.
    arguments = ["--rootdir=.", "--tb=short", "-q", "-p", "no:randomly", "-p", "no:random-order"]
    arguments += [*config.pytest_add_cli_args_test_selection, *config.pytest_add_cli_args]
    arguments += ["-p", "one_example", "--hypothesis-profile=layout"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *arguments],
        cwd=mutants,
        env={**env, "MUTANT_UNDER_TEST": "stats"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    failed = [line for line in result.stdout.splitlines() if line.startswith(("FAILED tests/", "ERROR tests/"))]
    assert result.returncode == 0, (
        "make mutation would stop before its first mutant: these tests of its selection fail in mutmut's tree "
        "(add what they need to also_copy in [tool.mutmut], or leave them out of the selection):\n"
        + "\n".join(failed or result.stdout.splitlines()[-30:])
        + result.stderr[-2000:]
    )
