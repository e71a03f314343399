"""template.yaml: valid for cfn-lint, transformable by SAM, and in step with the code's constants."""

from __future__ import annotations

import copy
import importlib
import inspect
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
