"""The package as a user gets it: the built wheel and sdist, and the wheel installed in a fresh virtual environment.

It all runs without a network (make test runs in a loopback-only network namespace): the wheel and sdist are
built by this environment's setuptools (no isolated build environment to download), and the fresh environment
gets the package's dependencies from wheels repacked from the distributions installed here, through a pip that
sees no index and no configuration. So only what the wheel declares is installed: a dependency it forgets to
declare, or a module it forgets to ship, fails the quick start there.
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

import consumer
from consumer.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
# The commands whose --help examples run in the order they depend on each other: the DynamoDB table is created
# before a handler is invoked on it, and records exist before they are listed, shown and deleted.
COMMAND_ORDER = ["table", "invoke", "key", "records"]


class Built(NamedTuple):
    wheel: Path
    sdist: Path


class Installed(NamedTuple):
    python: Path
    bin: Path


def run(*args, cwd=None, env=None, timeout=TIMEOUT):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout,
                          check=False)  # fmt: skip


def user_env(installed: Installed, **extra: str) -> dict[str, str]:
    """A shell a user of the installed package has: its bin first on PATH, nothing of this repository's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "IDEMPOTENCY_"))}
    env.pop("AWS_LAMBDA_FUNCTION_NAME", None)
    env.pop("VIRTUAL_ENV", None)
    return {**env, "PATH": f"{installed.bin}{os.pathsep}{env.get('PATH', '')}", "PYTHONUNBUFFERED": "1", **extra}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """``python -m build``: the sdist, then the wheel built from that sdist (so the sdist must be complete)."""
    out = tmp_path_factory.mktemp("dist")
    result = run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return Built(wheel, sdist)


def dependency_closure(requirements: list[str]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions ``requirements`` need, transitively (markers evaluated for this interpreter)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = Requirement(todo.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found[name] = importlib.metadata.distribution(requirement.name)
        todo.extend(found[name].requires or [])
    return found


def repack(dist: importlib.metadata.Distribution, into: Path) -> Path:
    """A wheel of an installed distribution: the files its RECORD lists, and a RECORD of their hashes."""
    files = dist.files or []
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    tags = [line.split(":", 1)[1].strip().split("-") for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]  # fmt: skip
    tag = "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))  # py2-none-any + py3-... -> py2.py3
    wheel = into / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    left_out = {f"{info}/{name}" for name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    record = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for file in files:
            name = file.as_posix()
            # Scripts live outside site-packages (pip writes them again from entry_points.txt); bytecode is pip's.
            if name.startswith("../") or "__pycache__" in file.parts or name in left_out:
                continue
            data = Path(str(dist.locate_file(file))).read_bytes()
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return wheel


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Installed:
    """A fresh venv (``python -m venv``) with the built wheel ``pip install``-ed, and nothing else of ours."""
    base = tmp_path_factory.mktemp("fresh")
    wheelhouse = base / "wheelhouse"
    wheelhouse.mkdir()
    for dist in dependency_closure(wheel_metadata(built.wheel).get_all("Requires-Dist") or []).values():
        repack(dist, wheelhouse)
    venv = base / "venv"
    created = run(sys.executable, "-m", "venv", venv)
    assert created.returncode == 0, created.stderr
    python = venv / "bin" / "python"
    pip_env = {**user_env(Installed(python, venv / "bin")), "PIP_CONFIG_FILE": os.devnull}
    pip = run(python, "-m", "pip", "install", "--no-index", "--find-links", wheelhouse, "--no-compile",
              "--disable-pip-version-check", built.wheel, env=pip_env)  # fmt: skip
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return Installed(python, venv / "bin")


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


def source_files() -> set[str]:
    """Every module and type marker of the two import packages, as the source tree has them."""
    return {
        path.relative_to(ROOT).as_posix()
        for package in ("consumer", "persistence")
        for path in (ROOT / package).rglob("*")
        if path.suffix in (".py", ".typed") and "__pycache__" not in path.parts
    }


def test_wheel_and_sdist_pass_twine_check_strict(built):
    result = run(sys.executable, "-m", "twine", "check", "--strict", built.wheel, built.sdist)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_wheel_and_sdist_hold_every_module_type_marker_and_the_licence(built):
    expected = source_files()
    assert {"consumer/py.typed", "persistence/py.typed", "persistence/testing/__init__.py"} <= expected
    with zipfile.ZipFile(built.wheel) as archive:
        in_wheel = set(archive.namelist())
    assert expected - in_wheel == set()
    info = f"idempotent_consumer-{consumer.__version__}.dist-info"
    assert f"{info}/licenses/LICENSE" in in_wheel
    with tarfile.open(built.sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert expected | {"LICENSE", "README.md", "pyproject.toml"} <= in_sdist


def test_metadata_names_the_licence_version_urls_and_supported_pythons(built):
    meta = wheel_metadata(built.wheel)
    assert meta["Metadata-Version"] == "2.4"
    assert meta["Version"] == consumer.__version__ == importlib.metadata.version("idempotent-consumer")
    assert (meta["License-Expression"], meta.get_all("License-File")) == ("MIT", ["LICENSE"])
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Changelog", "Issues"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())
    classifiers = meta.get_all("Classifier") or []
    assert not [c for c in classifiers if c.startswith("License ::")]  # the expression is the licence
    assert "Typing :: Typed" in classifiers
    assert [c for c in classifiers if c.startswith("Development Status ::")]
    # Every minor version the classifiers claim is allowed by Requires-Python, and the oldest allowed is claimed.
    minors = sorted(
        int(m[1]) for c in classifiers if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c))
    )
    requires = SpecifierSet(meta["Requires-Python"])
    assert minors
    assert all(requires.contains(f"3.{minor}.0") for minor in minors)
    assert not requires.contains(f"3.{minors[0] - 1}.99")
    assert minors == list(range(minors[0], minors[-1] + 1))
    # The changelog has an entry for this version, in Keep a Changelog's form.
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(consumer.__version__)}\] - ", changelog, re.MULTILINE)
    assert f"[{consumer.__version__}]: https://" in changelog


def test_every_readme_link_resolves_where_pypi_shows_the_readme(built):
    # PyPI renders the long description without the repository: a relative link there goes nowhere. So every link
    # is absolute, and one into the project names a file of this tree (the image by its raw address).
    meta = wheel_metadata(built.wheel)
    home = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])["Source"]
    owner_repo = home.removeprefix("https://github.com/")
    project = (f"{home}/blob/main/", f"https://raw.githubusercontent.com/{owner_repo}/main/")
    targets = re.findall(r"\]\(([^)\s]+)\)", meta.get_payload())
    assert targets
    relative = [t for t in targets if not t.startswith(("https://", "#"))]
    assert relative == [], "relative links break on PyPI"
    ours = [t.removeprefix(p).split("#")[0] for t in targets for p in project if t.startswith(p)]
    assert "docs/bench.png" in ours
    assert [t for t in ours if not (ROOT / t).is_file()] == []


def quick_start() -> tuple[str, str]:
    """The README's quick start: the first Python block of its section, and the output block after it."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, re.DOTALL)
    assert found, "the quick start's code and output blocks were not found"
    return found[1], found[2]


def test_quick_start_runs_from_the_installed_wheel_outside_the_repository(installed, tmp_path):
    assert ROOT not in tmp_path.parents
    code, expected = quick_start()
    (tmp_path / "quick_start.py").write_text(code)
    env = user_env(installed)
    result = subprocess.run([installed.python, "quick_start.py"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=tmp_path, env=env, timeout=TIMEOUT, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout
    assert result.stdout == expected  # warnings (stderr) included
    where = run(installed.python, "-c", "import consumer, persistence; print(consumer.__file__, persistence.__file__)",
                cwd=tmp_path, env=env)  # fmt: skip
    site = installed.python.parent.parent / "lib"
    assert all(Path(f).is_relative_to(site) for f in where.stdout.split()), where.stdout + where.stderr


def test_version_option_prints_the_installed_version(installed, tmp_path):
    env = user_env(installed)
    result = run("idempotent-consumer", "--version", cwd=tmp_path, env=env)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"idempotent-consumer {consumer.__version__}\n", "")
    versions = run(installed.python, "-c", "import consumer, importlib.metadata as m; "
                   "print(consumer.__version__, m.version('idempotent-consumer'))", cwd=tmp_path, env=env)  # fmt: skip
    assert versions.stdout.split() == [consumer.__version__] * 2, versions.stderr


APP = """
from consumer import BatchProcessor, EventType, process_partial_response
from persistence import store_from_url

processor = BatchProcessor(EventType.SQS, store=store_from_url())


def handler(event, context):
    return process_partial_response(event, lambda record: record.json_body["order_id"], processor, context)
"""


def sqs_event(*orders: str) -> dict[str, object]:
    # Each message carries a producer's key: the `key --header Idempotency-Key` example reads it (without, exit 1).
    def attributes(order: str) -> dict[str, object]:
        return {"Idempotency-Key": {"dataType": "String", "stringValue": f"k-{order}"}}

    return {"Records": [{"messageId": f"m-{order}", "body": json.dumps({"order_id": order}), "attributes": {},
                         "messageAttributes": attributes(order), "eventSource": "aws:sqs"}
                        for order in orders]}  # fmt: skip


def help_examples() -> dict[str, list[str]]:
    """Each top-level command's --help examples (its own and its subcommands'), continuation lines joined."""

    def epilogs(parser: argparse.ArgumentParser) -> list[str]:
        found = [parser.epilog or ""]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += [e for sub in action.choices.values() for e in epilogs(sub)]
        return found

    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    examples: dict[str, list[str]] = {}
    for name, parser in commands.choices.items():
        text = "\n".join(epilogs(parser)).replace("\\\n", "")
        lines = [line.strip() for line in text.splitlines() if "idempotent-consumer " in line]
        examples[name] = list(dict.fromkeys(lines))  # subcommands share their parent's examples
        assert examples[name], f"idempotent-consumer {name} --help shows no examples"
    return examples


def command_words(line: str) -> list[str]:
    """The command's own words: no leading VARIABLE=value, no ``< FILE``, no comment."""
    words = shlex.split(line, comments=True)
    while re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words.pop(0)
    if "<" in words:
        del words[words.index("<") : words.index("<") + 2]
    return words


def test_every_help_example_runs_as_written_outside_the_repository(installed, tmp_path, ddb_server):
    """Each example of every --help, in a user's directory holding only app.py and event.json, in a shell."""
    examples = help_examples()
    assert sorted(examples) == sorted(COMMAND_ORDER)
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "event.json").write_text(json.dumps(sqs_event("o-1", "o-2")))
    env = user_env(installed)

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return run("bash", "-c", line, cwd=tmp_path, env=env)

    def a_key() -> str:
        # A record under the prefix the examples use, made again each time (a delete example removes one).
        assert shell("idempotent-consumer invoke app:handler --event event.json --function-name orders").returncode == 0
        listed = shell("idempotent-consumer records list --json")
        return next(k for row in map(json.loads, listed.stdout.splitlines()) if (k := row["key"]).startswith("orders#"))

    ran = 0
    for line in (line for command in COMMAND_ORDER for line in examples[command]):
        words = command_words(line)
        assert words[0] == "idempotent-consumer", line
        build_parser().parse_args(words[1:])  # exits (fails the test) on a usage error
        if ("dynamodb://" in line or "table create" in line) and "127.0.0.1:8000" not in line:
            continue  # real AWS: parsed above, not run
        local = re.sub(r"'orders#[^']*\.\.\.'", lambda _: shlex.quote(a_key()), line)
        result = shell(local.replace("http://127.0.0.1:8000", ddb_server.endpoint_url))
        assert result.returncode == 0, f"{line}\n{result.stdout}{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        ran += 1
    assert ran >= 12
    assert (tmp_path / "orders.sqlite3").exists()  # the example naming IDEMPOTENCY_STORE_URL used it


def test_make_demo_installs_the_runtime_dependencies_alone_and_the_demo_runs_on_them(installed, tmp_path):
    dry = run("make", "-n", "-C", ROOT, "demo", f"VENV={tmp_path / 'venv'}")
    assert dry.returncode == 0, dry.stderr
    installs = [line for line in dry.stdout.splitlines() if " -m pip install " in line]
    assert len(installs) == 1, dry.stdout
    assert installs[0].endswith(" -e ."), installs  # the library and its dependencies: no extra, no dev tools
    # The fresh environment holds the wheel and its dependencies only; the demo runs there, the library the wheel's.
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "samples").symlink_to(ROOT / "samples", target_is_directory=True)
    result = subprocess.run([installed.python, "-m", "samples.demo"], capture_output=True, text=True, cwd=tmp_path,
                            env=user_env(installed, PYTHONPATH=str(tmp_path / "code")), timeout=TIMEOUT,
                            check=False)  # fmt: skip
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert "Every order was charged exactly once" in result.stdout


def a_wheel(folder: Path, name: str, files: dict[str, str]) -> Path:
    """A minimal wheel of the distribution ``name`` holding ``files`` (another project's, for instance)."""
    info = f"{name.replace('-', '_')}-1.0.dist-info"
    contents = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    wheel = folder / f"{info.removesuffix('.dist-info')}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{path},,\n" for path in [*contents, f"{info}/RECORD"]))
    return wheel


def test_a_package_installed_over_ours_is_named_by_the_command_instead_of_an_import_error(built, tmp_path):
    # Another project's distribution shipping a top-level `consumer` package: pip writes its __init__.py over ours
    # without a warning, and every file of ours it does not replace stays (the command's module among them).
    other = a_wheel(tmp_path, "other-consumer", {"consumer/__init__.py": '"""Another project\'s consumer."""\n'})
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv).returncode == 0
    # A user's environment: no PYTHONPATH naming this checkout, whose metadata pip would take for an installed copy.
    env = {**user_env(Installed(venv / "bin" / "python", venv / "bin")), "PIP_CONFIG_FILE": os.devnull}
    for wheel in (built.wheel, other):  # ours first, then the other over it
        pip = run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-index",
                  "--no-deps", "--no-compile", "--disable-pip-version-check", wheel, env=env)  # fmt: skip
        assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (venv / "bin" / "idempotent-consumer").exists(), "our wheel was not installed"
    result = run(venv / "bin" / "idempotent-consumer", "--version", cwd=tmp_path, env=env)
    assert result.returncode == 1
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert result.stderr == (
        "idempotent-consumer: another installed package ships a top-level 'consumer' package: other-consumer; its "
        f"files replaced idempotent-consumer's in {site / 'consumer'}, so the two cannot share an environment. "
        "Uninstall it (pip uninstall other-consumer), then reinstall idempotent-consumer (pip install "
        "--force-reinstall idempotent-consumer), or give each its own virtual environment\n"
    )
