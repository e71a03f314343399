"""A user's own ``consumer.py`` or ``persistence.py`` (file or folder) shadowing one of our two import packages.

Each scenario is a user's function directory: the handler and the shadowing file side by side, run the way Python
and Lambda run it (that directory first on ``sys.path``), and through ``idempotent-consumer invoke``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import consumer
import persistence
from consumer import _shadowing as consumer_check
from persistence import _shadowing as persistence_check

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "idempotent-consumer"
APP = "from consumer import BatchProcessor\n\n\ndef handler(event, context):\n    return 'ran'\n"
RAN = "print('THE USER MODULE RAN')\n"


def function_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    """A user's function directory holding ``files`` (``name/__init__.py`` makes a folder)."""
    root = tmp_path / "function"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def python(root: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``root``: the current directory first on sys.path, as a function's root in Lambda."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env,
                          timeout=60, check=False)  # fmt: skip


def invoke(root: Path, handler: str = "app:handler") -> subprocess.CompletedProcess[str]:
    """The installed ``idempotent-consumer`` command (its own directory first on sys.path, not ``root``)."""
    (root / "event.json").write_text('{"id": "e-1"}')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(CLI), "invoke", handler, "--event", "event.json", "--store", "memory://"],
                          capture_output=True, text=True, cwd=root, env=env, timeout=60, check=False)  # fmt: skip


def message(kind: str, found: Path, name: str) -> str:
    return (
        f"your {kind} {found} shadows the package {name!r} of idempotent-consumer ({ROOT / name}): Python imports "
        f"yours instead, as its directory comes first on sys.path (a Lambda function's root does). Rename your "
        f"{kind} (any other name will do), and the imports and the Lambda handler setting that name it."
    )


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_a_users_persistence_py_is_refused_by_name_before_it_runs(tmp_path):
    root = function_dir(tmp_path, {"persistence.py": RAN, "app.py": APP})
    result = python(root, "import app")
    assert result.returncode == 1
    assert last_line(result) == f"ImportError: {message('file', root / 'persistence.py', 'persistence')}"
    assert "THE USER MODULE RAN" not in result.stdout  # refused before Python ran it


def test_a_users_persistence_folder_is_refused_as_a_folder(tmp_path):
    root = function_dir(tmp_path, {"persistence/__init__.py": RAN, "app.py": APP})
    result = python(root, "import app")
    assert last_line(result) == f"ImportError: {message('folder', root / 'persistence', 'persistence')}"
    assert "THE USER MODULE RAN" not in result.stdout


def test_a_users_consumer_py_is_refused_by_name_when_persistence_is_imported_first(tmp_path):
    app = "from persistence import InMemoryPersistenceLayer\n" + APP
    root = function_dir(tmp_path, {"consumer.py": "", "app.py": app})
    result = python(root, "import app")
    assert last_line(result) == f"ImportError: {message('file', root / 'consumer.py', 'consumer')}"


def test_a_handler_file_named_consumer_py_is_refused_when_it_imports_persistence(tmp_path):
    # The handler itself is consumer.py (Lambda handler setting consumer.handler): Python is importing it as
    # `consumer` when it imports persistence, which finds it half-initialised in sys.modules.
    handler = "from persistence import InMemoryPersistenceLayer\nfrom consumer import BatchProcessor\n"
    root = function_dir(tmp_path, {"consumer.py": handler})
    result = python(root, "import consumer")
    assert last_line(result) == f"ImportError: {message('file', root / 'consumer.py', 'consumer')}"


def test_a_handler_importing_a_shadowed_consumer_first_gets_pythons_own_error_naming_the_file(tmp_path):
    # None of our code runs: Python imports the user's consumer.py in place of our package. Its error names the
    # file, and docs/troubleshooting.md quotes this message with the fix; `invoke` catches it first.
    root = function_dir(tmp_path, {"consumer.py": "", "app.py": APP})
    result = python(root, "import app")
    assert f"ImportError: cannot import name 'BatchProcessor' from 'consumer' ({root / 'consumer.py'})" in (
        last_line(result)
    )
    troubleshooting = (ROOT / "docs" / "troubleshooting.md").read_text()
    shown = message("file", Path("/var/task/persistence.py"), "persistence").replace(str(ROOT), "/opt/python")
    assert f"ImportError: {shown}\n" in troubleshooting  # the message as the library words it
    assert "cannot import name 'BatchProcessor' from 'consumer' (/var/task/consumer.py)" in troubleshooting
    assert "No module named 'consumer.batch'; 'consumer' is not a package" in troubleshooting


@pytest.mark.parametrize(
    ("files", "kind", "shadow"),
    [
        ({"consumer.py": RAN}, "file", "consumer.py"),
        ({"consumer/__init__.py": RAN}, "folder", "consumer"),
        ({"persistence.py": RAN}, "file", "persistence.py"),
    ],
    ids=["consumer.py", "consumer-folder", "persistence.py"],
)
def test_invoke_refuses_a_shadowing_file_before_it_imports_the_handler(tmp_path, files, kind, shadow):
    # Under invoke our packages are already imported, so the handler would get ours and work; in Lambda it would not.
    root = function_dir(tmp_path, {**files, "app.py": RAN + APP})
    result = invoke(root)
    name = shadow.removesuffix(".py")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"idempotent-consumer: cannot load handler 'app:handler': {message(kind, root / shadow, name)}\n"
    )


def test_invoke_refuses_a_handler_module_named_consumer(tmp_path):
    root = function_dir(tmp_path, {"consumer.py": APP})
    result = invoke(root, "consumer:handler")
    assert result.returncode == 1
    assert message("file", root / "consumer.py", "consumer") in result.stderr


def test_no_alarm_for_our_own_packages_a_copy_installed_beside_the_handler_or_a_folder_without_init(tmp_path):
    # A folder without __init__.py never shadows a package; `pip install --target .` (or sam build) puts a copy of
    # this distribution, with its .dist-info, in the function's directory.
    root = function_dir(tmp_path, {"consumer/notes.txt": "", "app.py": APP})
    assert invoke(root).stdout == '"ran"\n'
    assert python(root, "import app; print(app.handler(None, None))").stdout == "ran\n"
    vendored = function_dir(tmp_path / "vendored", {"app.py": APP, "idempotent_consumer-0.1.0.dist-info/RECORD": ""})
    for name in ("consumer", "persistence"):
        shutil.copytree(ROOT / name, vendored / name, ignore=shutil.ignore_patterns("__pycache__"))
    assert invoke(vendored).stdout == '"ran"\n'
    # invoke run from a clone of the repository (the README's sample commands), the wheel installed elsewhere.
    checkout = function_dir(tmp_path / "checkout", {"app.py": APP, "pyproject.toml": ""})
    for name in ("consumer", "persistence"):
        shutil.copytree(ROOT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    assert invoke(checkout).stdout == '"ran"\n'


def test_a_module_in_sys_modules_is_judged_by_its_file_a_symlinked_copy_of_ours_passes(tmp_path, monkeypatch):
    stranger = types.ModuleType("persistence")
    stranger.__file__ = str(tmp_path / "persistence.py")
    monkeypatch.setitem(sys.modules, "persistence", stranger)
    with pytest.raises(ImportError) as refused:
        consumer_check.refuse_shadowed("persistence")
    assert (refused.value.name, refused.value.path) == ("persistence", str(tmp_path / "persistence.py"))
    (tmp_path / "link").symlink_to(ROOT / "persistence", target_is_directory=True)
    stranger.__file__ = str(tmp_path / "link" / "__init__.py")
    consumer_check.refuse_shadowed("persistence")  # the same folder, by another name
    monkeypatch.setitem(sys.modules, "persistence", persistence)
    consumer_check.refuse_shadowed("persistence")
    monkeypatch.setitem(sys.modules, "consumer", consumer)
    persistence_check.refuse_shadowed("consumer")


def test_both_packages_share_one_check():
    # persistence never imports consumer, and consumer checks persistence before importing it: consumer loads
    # persistence's check from its file (a user's persistence.py is not run to reach it: the tests above).
    for name in ("refuse_shadowed", "shadowing_message", "_same", "_HOME"):
        assert getattr(consumer_check, name) is getattr(persistence_check, name)
