"""template.yaml: valid for cfn-lint, transformable by SAM, and in step with the code's constants."""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cfnlint.decode import cfn_yaml
from samtranslator.translator.transform import transform

from consumer import EventType
from consumer.observability.metrics import DIMENSIONS, METRICS, Metrics
from persistence import AttributeNames

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
TABLE_ACTIONS = {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
BATCH_EVENTS = {"SQS", "Kinesis", "DynamoDB", "MSK"}


@pytest.fixture(scope="module")
def template():
    return cfn_yaml.load(str(TEMPLATE))


def functions(template):
    return {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}


def test_cfn_lint_finds_nothing():
    cfn_lint = shutil.which("cfn-lint", path=str(Path(sys.executable).parent)) or "cfn-lint"
    result = subprocess.run([cfn_lint, str(TEMPLATE)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


class _NoManagedPolicies:
    def load(self):
        return {}


def test_sam_transforms_it_into_plain_cloudformation(template):
    packaged = copy.deepcopy(dict(template))  # as `sam package` leaves it: code uploaded to S3
    packaged["Globals"]["Function"]["CodeUri"] = "s3://artifacts/idempotent-consumer.zip"
    for resource in packaged["Resources"].values():
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = "s3://artifacts/idempotent-consumer-layer.zip"
    output = transform(packaged, {}, _NoManagedPolicies())
    types = {r["Type"] for r in output["Resources"].values()}
    assert "AWS::Serverless::Function" not in types
    assert {"AWS::Lambda::Function", "AWS::Lambda::EventSourceMapping", "AWS::Events::Rule"} <= types
    mappings = [r for r in output["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    batch_events = [e for f in functions(template).values() for e in f["Properties"]["Events"].values()
                    if e["Type"] in BATCH_EVENTS]  # fmt: skip
    assert len(mappings) == len(batch_events) == 6  # SQS x3 (one async), Kinesis, DynamoDB Streams, MSK
    assert all(m["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"] for m in mappings)
    # Kafka's error handling controls, partial batch response included, are a provisioned-mode feature.
    (kafka,) = [m for m in mappings if "Topics" in m["Properties"]]
    assert kafka["Properties"]["ProvisionedPollerConfig"]["MinimumPollers"] >= 1


def test_table_attribute_names_are_the_codes_defaults(template):
    table = template["Resources"]["IdempotencyTable"]["Properties"]
    names = AttributeNames()
    assert table["KeySchema"] == [{"AttributeName": names.key, "KeyType": "HASH"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": names.expires_at, "Enabled": True}
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_every_sample_has_a_function_whose_handler_imports(template):
    handlers = {f["Properties"]["Handler"] for f in functions(template).values()}
    samples = {p.stem for p in (ROOT / "samples").glob("*.py")} - {"__init__", "ledger", "demo"}
    assert {h.split(".")[1] for h in handlers} == samples
    for handler in handlers:
        module, _, name = handler.rpartition(".")
        function = getattr(importlib.import_module(module), name)
        assert callable(function), handler
        # The Lambda Python runtime calls the handler and never awaits it: an async sample runs its own loop.
        assert not inspect.iscoroutinefunction(function), handler


def test_batch_functions_report_item_failures_and_iam_is_least_privilege(template):
    for name, function in functions(template).items():
        props = function["Properties"]
        for event in props["Events"].values():
            if event["Type"] in BATCH_EVENTS:
                assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"], name
        (policy,) = props["Policies"]
        (statement,) = policy["Statement"]
        assert set(statement["Action"]) == TABLE_ACTIONS, name
        assert statement["Resource"] == {"Fn::GetAtt": ["IdempotencyTable", "Arn"]}, name


def test_queues_outlast_the_function_and_redrive_to_a_dead_letter_queue(template):
    timeout = template["Globals"]["Function"]["Timeout"]
    for name in ("OrdersQueue", "ReservationsQueue", "AccountsFifoQueue"):
        queue = template["Resources"][name]["Properties"]
        assert queue["VisibilityTimeout"] >= 6 * timeout, name
        assert queue["RedrivePolicy"]["maxReceiveCount"] >= 1, name


def test_streams_bisect_retry_and_keep_what_fails(template):
    resources = template["Resources"]
    for name in ("KinesisClickstreamFunction", "DynamoDBStreamAuditFunction"):
        (event,) = resources[name]["Properties"]["Events"].values()
        props = event["Properties"]
        assert props["BisectBatchOnFunctionError"] is True, name
        assert props["MaximumRetryAttempts"] > 0, name
        assert props["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0] in resources, name


SOURCES = {"SQS": EventType.SQS.value, "Kinesis": EventType.KINESIS.value, "DynamoDB": EventType.DYNAMODB_STREAMS.value}


def test_the_alarms_watch_metrics_the_functions_write(template):
    alarms = {n: r["Properties"] for n, r in template["Resources"].items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert {a["MetricName"] for a in alarms.values()} >= {"InProgress", "LockLost"}  # stuck records, lost locks
    metrics = Metrics.from_environment(template["Globals"]["Function"]["Environment"]["Variables"])
    assert metrics is not None  # every function writes its EMF document
    for name, alarm in alarms.items():
        assert alarm["Namespace"] == metrics.namespace, name
        assert alarm["MetricName"] in METRICS, name
        dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert tuple(dimensions) == DIMENSIONS, name
        function = template["Resources"][dimensions["FunctionName"]["Ref"]]  # the deployed function's name
        (event,) = function["Properties"]["Events"].values()
        assert dimensions["EventSource"] == SOURCES[event["Type"]], name
        assert alarm["Statistic"] == "Sum", name
        assert alarm["TreatMissingData"] == "notBreaching", name  # a quiet queue is not an alarm


def run_make(target: str, artifacts: Path) -> None:
    # Offline, as make test runs: pip builds the layer's wheel with this environment's setuptools and fetches
    # nothing (sam build lets pip fetch the build backend from the package index).
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_CONFIG_FILE": os.devnull}
    result = subprocess.run(["make", "-s", "-C", str(ROOT), target, f"ARTIFACTS_DIR={artifacts}",
                             f"PYTHON={sys.executable}"], capture_output=True, text=True, env=env, check=False,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_sam_build_ships_the_samples_in_each_function_and_the_library_in_one_layer(template, tmp_path):
    """What `sam build` runs, target by target: a function holds samples/*.py, the layer the library; both work."""
    (layer_name,) = [n for n, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::LayerVersion"]
    assert template["Globals"]["Function"]["CodeUri"] == "samples/"
    assert template["Globals"]["Function"]["Layers"] == [{"Ref": layer_name}]
    for name in [layer_name, *functions(template)]:
        metadata = template["Resources"][name]["Metadata"]
        assert (metadata["BuildMethod"], metadata["ContextPath"]) == ("makefile", "."), name  # the Makefile's targets
    run_make(f"build-{layer_name}", tmp_path / "layer")
    sources = {
        p.relative_to(ROOT).as_posix()
        for package in ("consumer", "persistence")
        for p in (ROOT / package).rglob("*")
        if p.suffix in {".py", ".typed"} and "__pycache__" not in p.parts
    }
    in_layer = files_under(tmp_path / "layer")
    assert {f.removeprefix("python/") for f in in_layer if not f.startswith("python/idempotent_consumer-")} == sources
    assert not (ROOT / "build").exists()  # built from a copy: no build/ folder to shadow `python -m build` here
    samples = {p.relative_to(ROOT).as_posix() for p in (ROOT / "samples").glob("*.py")}
    for name in functions(template):
        run_make(f"build-{name}", tmp_path / name)
        assert files_under(tmp_path / name) == samples, name
    # As Lambda runs them: the function's folder, then the layer's python/ (boto3 comes with the runtime).
    sqs = tmp_path / "SqsOrdersFunction"
    code = (
        "import json, sys, consumer, samples.sqs_orders as s\n"
        "from consumer.local_context import LocalContext\n"
        "print(consumer.__file__, s.__file__)\n"
        "print(json.dumps(s.handler(json.load(open(sys.argv[1])), LocalContext())))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{sqs}{os.pathsep}{tmp_path / 'layer' / 'python'}",
           "IDEMPOTENCY_STORE_URL": "memory://", "SAMPLES_LEDGER": str(tmp_path / "ledger.sqlite3")}  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code, str(ROOT / "samples/events/sqs_orders.json")], cwd=tmp_path,
                            env=env, capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    where, response = result.stdout.splitlines()
    library, sample = where.split()
    assert Path(library).is_relative_to(tmp_path / "layer"), where
    assert Path(sample).is_relative_to(sqs), where
    assert json.loads(response) == {"batchItemFailures": [{"itemIdentifier": "1e7f9a3b-8c2d-4f5e-b6a0-3d4c5e6f7a04"}]}
