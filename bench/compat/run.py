"""How far Powertools' own code runs here, measured from a checkout of Powertools' repository.

``make powertools-compat PT_REPO=<checkout of powertools-lambda-python>`` runs, on Powertools (as installed in
``bench/.compat-venv``, from ``requirements.txt`` beside this file) and on this library through the name-only shim
(:mod:`shim`):

- the documented examples of its idempotency and batch pages (:mod:`examples`), against DynamoDB Local, comparing
  what each did;
- with ``--suites``, its functional test suites ``tests/functional/batch`` and ``tests/functional/idempotency``
  (pytest, with the shim as a plugin for our run), counting what passes.

It prints the tables the migration guide gives, with the checkout's commit and version. Nothing of Powertools' is
copied into this repository: the checkout is read where it is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from causes import causes_table  # noqa: E402 - after the path that holds it

SUITES = ("tests/functional/batch", "tests/functional/idempotency")


def checkout_identity(repo: Path) -> str:
    """``<commit> (version <x>)`` of the checkout, as far as it says."""
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"],  # noqa: S607 - the user's git, by name on PATH
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    version_file = repo / "aws_lambda_powertools" / "shared" / "version.py"
    found = re.search(r'VERSION = "([^"]+)"', version_file.read_text()) if version_file.is_file() else None
    return f"{commit or 'unknown commit'} (version {found.group(1) if found else 'unknown'})"


def environment(library: str, extra: list[str]) -> dict[str, str]:
    """The run's environment: ours sees this tree first; both see fake credentials only (nothing leaves)."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_LAMBDA_FUNCTION_NAME", "IDEMPOTENCY_DISABLED"):
        env.pop(name, None)
    paths = [str(ROOT)] if library == "ours" else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, *extra])
    return env


def run_examples(repo: Path, endpoint: str, directory: Path) -> dict[str, dict[str, Any]]:
    """Both runs of the documented examples at once; ``{library: {example: result}}``."""
    started = {}
    for library in ("powertools", "ours"):
        output = directory / f"examples-{library}.json"
        command = [sys.executable, "-W", "ignore", str(HERE / "examples.py"), "--pt-repo", str(repo)]
        command += ["--library", library, "--endpoint", endpoint, "--output", str(output)]
        process = subprocess.Popen(
            command, env=environment(library, []), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        started[library] = (process, output)
    results = {}
    for library, (process, output) in started.items():
        _, stderr = process.communicate(timeout=600)
        if process.returncode != 0:
            raise SystemExit(f"the {library} run of the examples failed:\n{stderr[-3000:]}")
        results[library] = json.loads(output.read_text())
    return results


def run_suite(repo: Path, suite: str, library: str, directory: Path) -> dict[str, dict[str, str]]:
    """One functional suite on one library; ``{test id: {"outcome": passed|failure|error|skipped, "why": text}}``.

    The checkout goes at the end of ``sys.path`` (``--import-mode=append``): its tests import ``tests.functional``
    from it, while ``aws_lambda_powertools`` is the installed one, not the checkout's source. pytest runs in the
    checkout, so ``-P`` keeps the working directory off ``sys.path``: without it the checkout's own
    ``aws_lambda_powertools`` would be imported first, and the baseline would measure the checkout's source.
    """
    report = directory / f"{library}-{suite.replace('/', '_')}.xml"
    plugin = ["-p", "pytest_shim"] if library == "ours" else []
    command = [sys.executable, "-P", "-m", "pytest", str(repo / suite), "--rootdir", str(repo), "--import-mode=append"]
    command += ["-o", "addopts=", "-p", "no:cacheprovider", "-q", "-W", "ignore", f"--junitxml={report}", *plugin]
    subprocess.run(
        command,
        env=environment(library, [str(HERE)]),
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    outcomes: dict[str, dict[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 - pytest's own report
        kinds = {child.tag: child for child in case}
        outcome = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
        why = "" if outcome == "passed" else f"{kinds[outcome].get('message')}\n{kinds[outcome].text or ''}"
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = {"outcome": outcome, "why": why}
    return outcomes


def alike(theirs: Any, ours: Any) -> bool:
    """Whether we did what Powertools did; an error alike when ours is (a subclass of) the class Powertools raised."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        if "error" in theirs and "error" in ours:
            return theirs["error"] in ours["kinds"]
        return theirs.keys() == ours.keys() and all(alike(theirs[key], ours[key]) for key in theirs)
    if isinstance(theirs, list) and isinstance(ours, list):
        return len(theirs) == len(ours) and all(map(alike, theirs, ours))
    return bool(theirs == ours)


def shown(observed: Any) -> str:
    """``observed`` as the table shows it (an error by its type's name)."""

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items() if key != "kinds"}
        return [plain(item) for item in value] if isinstance(value, list) else value

    return json.dumps(plain(observed), default=repr)


def examples_table(results: dict[str, dict[str, Any]]) -> list[str]:
    theirs, ours = results["powertools"], results["ours"]
    same = [name for name in theirs if alike(theirs[name]["observed"], ours[name]["observed"])]
    lines = [
        (
            f"{len(same)} of the {len(theirs)} examples do here what they do on Powertools (an example that fails "
            "on Powertools as published counts when it fails here alike: the same error class, or a subclass of it)."
        ),
        "",
        "| example | on Powertools | here |",
        "|---|---|---|",
    ]
    for name in sorted(theirs):
        observed = theirs[name]["observed"]
        here = "the same" if alike(observed, ours[name]["observed"]) else shown(ours[name]["observed"])
        if here != "the same" and ours[name]["detail"]:
            here += f" ({ours[name]['detail'][:160]})"
        lines.append(f"| `{name}` | {shown(observed)[:100]} | {here} |")
    return lines


def suites_table(repo: Path, outcomes: dict[str, dict[str, dict[str, dict[str, str]]]]) -> list[str]:
    lines = ["| suite | tests | pass on Powertools | pass here |", "|---|---|---|---|"]
    for suite, by_library in outcomes.items():
        theirs, ours = by_library["powertools"], by_library["ours"]
        passed = [sum(run["outcome"] == "passed" for run in runs.values()) for runs in (theirs, ours)]
        lines.append(f"| {suite} | {len(theirs)} | {passed[0]} | {passed[1]} |")
    for suite, by_library in outcomes.items():
        failing = {
            test: by_library["ours"].get(test, {"why": "not run here"})["why"]
            for test, run in by_library["powertools"].items()
            if run["outcome"] == "passed" and by_library["ours"].get(test, {}).get("outcome") != "passed"
        }
        lines += ["", f"{suite}: passing on Powertools, failing here ({len(failing)}), by class and cause:"]
        lines += causes_table(repo, failing)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pt-repo", required=True, type=Path, help="a checkout of powertools-lambda-python")
    parser.add_argument("--suites", action="store_true", help="also run its functional batch and idempotency tests")
    parser.add_argument("--json", type=Path, help="also write every observation here")
    args = parser.parse_args()
    repo = args.pt_repo.resolve()
    if not (repo / "examples").is_dir():
        raise SystemExit(f"{repo} is not a checkout of powertools-lambda-python (no examples/ folder)")
    sys.path.insert(0, str(ROOT / "tests"))
    from importlib.metadata import version

    import dynamodb_local

    print(f"Powertools checkout: {checkout_identity(repo)}; Powertools installed: {version('aws-lambda-powertools')}")
    server = dynamodb_local.start()
    try:
        with tempfile.TemporaryDirectory() as directory:
            examples = run_examples(repo, server.endpoint_url, Path(directory))
            print("\n".join(["", "Documented examples:", *examples_table(examples)]))
            suites: dict[str, dict[str, dict[str, dict[str, str]]]] = {}
            if args.suites:
                for suite in SUITES:
                    suites[suite] = {
                        library: run_suite(repo, suite, library, Path(directory)) for library in ("powertools", "ours")
                    }
                print("\n".join(["", "Functional suites:", *suites_table(repo, suites)]))
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps({"examples": examples, "suites": suites}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
