"""A measure of "drop-in": Powertools' documented examples, run with only their import lines changed to ours.

``tests/dropin/examples/`` holds the idempotency examples of Powertools' documentation (the ones its idempotency
page shows, its testing examples included) and the getting-started examples of its batch page, written as fixtures
that do what each documented example does. ``tests/dropin/run.py`` runs each against DynamoDB Local and reports what
it did: once on Powertools as written (in ``bench/.venv``, when it is installed), once here with its
``from aws_lambda_powertools...`` imports rewritten to ours (``tests/dropin/rewrite.py``) and nothing else changed.

``POWERTOOLS`` is what each example does on Powertools; this test checks that, and pins which examples behave the
same here and how the others differ (``DIFFERS``), so the count the README states cannot drift.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "dropin" / "run.py"
BENCH_PYTHON = ROOT / "bench" / ".venv" / "bin" / "python"

pytestmark = pytest.mark.dynamodb

SQS_FAILED = "2f0a4c1e-0002-4a57-9d62-3c1b2a0e0002"
KINESIS_FAILED = "49590338271490256608559692538361571095921575989136588802"

#: What each documented example does on Powertools (checked below against Powertools itself, when installed).
POWERTOOLS = {
    "getting_started_with_idempotency": {
        "first": {"message": "success", "statusCode": 200},
        "duplicate_replays_the_first_payment": True,
        "another_event_is_a_new_payment": True,
        "records": 2,
    },
    "working_with_idempotent_function_dataclass": {
        "handler": [None, None],
        "direct": ["processed order 1", "processed order 2"],
        "records": 2,
    },
    "working_with_idempotent_function_pydantic": {
        "handler": [None, None],
        "direct": ["processed order 1", "processed order 2"],
        "records": 2,
    },
    "integrate_idempotency_with_batch_processor": {
        "responses": [{"batchItemFailures": []}, {"batchItemFailures": []}],
        "records": 2,
    },
    "working_with_payload_subset": {
        "status": 200,
        "same_subset_replays": True,
        "other_product_is_new": True,
        "records": 2,
    },
    "working_with_lambda_timeout": {"result": {"error": "RuntimeError"}},
    "working_with_exceptions": {
        "outcomes": [{"error": "SyntaxError"}, {"error": "SyntaxError"}],
        "posts": 1,
        "store_down": {"error": "RuntimeError"},
    },
    "customize_persistence_layer": {
        "responses": [{"order": "o-1"}, {"order": "o-1"}],
        "attributes": ["current_status", "expires_at", "idempotency_key", "result_data"],
    },
    "working_with_local_cache": {"same": True, "requests": [2, 0]},
    "working_with_record_expiration": {"expires_in_hours": 24},
    "working_with_validation_payload": {
        "first": 200,
        "again_replays": True,
        "tampered": {"error": "IdempotencyValidationError"},
    },
    "working_with_idempotency_key_required": {"with_key": True, "without_key": {"error": "IdempotencyKeyError"}},
    "working_with_custom_session": {"replayed": True, "records": 1},
    "working_with_custom_config": {"replayed": True, "records": 1},
    "working_with_composite_key": {"result": {"error": "TypeError"}, "records": 0},
    "bring_your_own_persistent_store": {"store": "TablePersistenceLayer"},
    "integrate_idempotency_with_validator": {
        "responses": [{"message": "hello", "statusCode": 200}, {"message": "hello", "statusCode": 200}],
        "records": 1,
    },
    "test_disabling_idempotency_utility": {"passed": True},
    "test_with_dynamodb_local": {"error": "AttributeError"},
    "test_with_io_operations": {"error": "AttributeError"},
    "batch_getting_started_sqs": {
        "response": {"batchItemFailures": [{"itemIdentifier": SQS_FAILED}]},
        "logged": [{"Message": "success"}],
    },
    "batch_getting_started_kinesis": {
        "response": {
            "batchItemFailures": [{"itemIdentifier": "49590338271490256608559692538361571095921575989136588802"}]
        },
        "logged": ["method", {"Message": "success"}, "method"],  # the example logs the method it does not call
    },
    "batch_getting_started_dynamodb": {
        "response": {"batchItemFailures": [{"itemIdentifier": "100000000002"}]},
        "logged": [{"text": "hello"}],
    },
    "batch_getting_started_sqs_fifo": {
        "response": {
            "batchItemFailures": [
                {"itemIdentifier": "a1b2c3d4-0002-4f5e-8d7c-0a1b2c3d0002"},
                {"itemIdentifier": "a1b2c3d4-0003-4f5e-8d7c-0a1b2c3d0003"},
            ]
        },
        "logged": [{"n": 1}],
    },
    "batch_getting_started_error_handling": {
        "response": {"batchItemFailures": [{"itemIdentifier": "5b9e0d7a-0002-4c3b-8e11-7a6f5d4c0002"}]},
        "logged": ["first", ""],
    },
    "batch_working_with_entire_batch_fail": {
        "response": {
            "batchItemFailures": [
                {"itemIdentifier": "9c1d2e3f-0001-4b5a-8c7d-6e5f4a3b0001"},
                {"itemIdentifier": "9c1d2e3f-0002-4b5a-8c7d-6e5f4a3b0002"},
            ]
        },
        "logged": [],
    },
    "batch_advanced_accessing_lambda_context": {"response": {"batchItemFailures": []}, "logged": [30000]},
    "batch_getting_started_async": {"response": {"batchItemFailures": []}, "requests": 2},
    "batch_getting_started_with_test": {"passed": True},
}

#: Examples that fail on Powertools itself, because of the example (each fails here too; see DIFFERS for how).
BROKEN_IN_THE_DOCS = {
    "working_with_lambda_timeout": "calls the function with the record positionally; it must be passed by keyword",
    "working_with_composite_key": "indexes the JSON body, a string, as a dict",
    "test_with_dynamodb_local": "calls app.handler; the app defines lambda_handler",
    "test_with_io_operations": "calls app.handler; the app defines lambda_handler",
}


class Difference(NamedTuple):
    observed: dict[str, object]
    why: str
    deliberate: bool


#: Examples that do not behave here as on Powertools: what they do instead, why, and whether it is by design.
DIFFERS = {
    "working_with_lambda_timeout": Difference(
        {"result": {"error": "TypeError"}},
        "fails on Powertools too; ours says so with a TypeError (a missing keyword argument), not a RuntimeError",
        deliberate=True,
    ),
    "bring_your_own_persistent_store": Difference(
        {"error": "ModuleNotFoundError"},
        "BasePersistenceLayer has no adapter (its hooks carry no lease: a late holder could commit over or delete "
        "its successor's lock); a store here implements acquire/complete/release, each one conditional write, "
        "and proves it with the shipped StoreContract suite",
        deliberate=True,
    ),
}

RUN_UNCHANGED = sorted(set(POWERTOOLS) - set(BROKEN_IN_THE_DOCS) - set(DIFFERS))
DOCUMENTED_COUNT = f"{len(RUN_UNCHANGED)} of the {len(POWERTOOLS) - len(BROKEN_IN_THE_DOCS)}"


def start(python: Path | str, library: str, endpoint: str, output: Path, **env: str) -> subprocess.Popen[str]:
    command = [str(python), "-W", "ignore", str(RUNNER), "--library", library, "--endpoint", endpoint]
    command += ["--output", str(output)]
    if library == "powertools":  # Powertools' parser needs pydantic, which only this environment has
        command += ["--extra-path", sysconfig.get_paths()["purelib"]]
    return subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def results(process: subprocess.Popen[str], output: Path) -> dict[str, dict]:
    _, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(output.read_text())


@pytest.fixture(scope="module")
def runs(ddb_server, tmp_path_factory) -> dict[str, dict[str, dict] | None]:
    """Both runs at once: ours, and Powertools' when ``bench/.venv`` has it (``None`` otherwise)."""
    directory = tmp_path_factory.mktemp("dropin")
    python_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    endpoint = ddb_server.endpoint_url
    ours = start(sys.executable, "ours", endpoint, directory / "ours.json", PYTHONPATH=python_path)
    theirs = None
    if BENCH_PYTHON.exists():
        theirs = start(BENCH_PYTHON, "powertools", endpoint, directory / "powertools.json", PYTHONPATH="")
    return {
        "ours": results(ours, directory / "ours.json"),
        "powertools": None if theirs is None else results(theirs, directory / "powertools.json"),
    }


@pytest.fixture(scope="module")
def ours(runs) -> dict[str, dict]:
    return runs["ours"]


@pytest.fixture(scope="module")
def powertools(runs) -> dict[str, dict]:
    if runs["powertools"] is None:
        pytest.skip("Powertools is installed only in bench/.venv (make install)")
    return runs["powertools"]


def test_every_example_has_an_expectation():
    examples = {path.stem for path in (ROOT / "tests" / "dropin" / "examples").glob("*.py")}
    apps = {name for name in examples if name.startswith(("app_test_", "batch_getting_started_with_test_app"))}
    assert examples - apps == set(POWERTOOLS)


def test_the_expectations_are_what_powertools_does(powertools):
    assert {name: result["observed"] for name, result in powertools.items()} == POWERTOOLS


@pytest.mark.parametrize("example", RUN_UNCHANGED)
def test_the_example_runs_unchanged_with_only_its_imports_rewritten(ours, example):
    assert ours[example]["observed"] == POWERTOOLS[example], ours[example]["detail"]


@pytest.mark.parametrize("example", sorted(BROKEN_IN_THE_DOCS.keys() - DIFFERS.keys()))
def test_an_example_broken_in_the_docs_fails_here_the_same_way(ours, example):
    assert ours[example]["observed"] == POWERTOOLS[example], ours[example]["detail"]


@pytest.mark.parametrize("example", sorted(DIFFERS))
def test_an_example_that_differs_differs_as_documented(ours, example):
    assert ours[example]["observed"] == DIFFERS[example].observed, ours[example]["detail"]


def test_the_readme_and_the_migration_guide_state_the_count():
    assert len(POWERTOOLS) == 29
    assert DOCUMENTED_COUNT == "24 of the 25"
    for document in ("README.md", "docs/migrating-from-powertools.md"):
        assert DOCUMENTED_COUNT in (ROOT / document).read_text(), document
    guide = (ROOT / "docs" / "migrating-from-powertools.md").read_text()
    for example in POWERTOOLS:
        assert f"`{example}`" in guide, example
