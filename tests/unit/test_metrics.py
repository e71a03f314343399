"""EMF metrics: off by default, one valid document per invocation when on, never a reason for a record to fail."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging

import pytest
from emf import EMFError, validate, validate_line
from events import ddb_record, kinesis_record, sqs_event, sqs_record
from fakes import FakeClock, FakeContext
from outcome_batches import run_every_outcome

from consumer import BatchProcessor, EventType, Metrics
from consumer.observability.metrics import DEFAULT_NAMESPACE, DIMENSIONS, METRICS
from persistence import InMemoryPersistenceLayer

SPEC_EXAMPLE = {  # the specification's own valid example
    "_aws": {
        "Timestamp": 1574109732004,
        "CloudWatchMetrics": [
            {
                "Namespace": "lambda-function-metrics",
                "Dimensions": [["functionVersion"]],
                "Metrics": [{"Name": "time", "Unit": "Milliseconds"}],
            }
        ],
    },
    "functionVersion": "$LATEST",
    "time": 100,
    "requestId": "989ffbf8-9ace-4817-a57c-e4dd734019ee",
}


def broken(change):
    document = copy.deepcopy(SPEC_EXAMPLE)
    change(document)
    return document


def directive(document):
    return document["_aws"]["CloudWatchMetrics"][0]


BROKEN = {
    "no _aws": lambda d: d.pop("_aws"),
    "timestamp in seconds, as a float": lambda d: d["_aws"].update(Timestamp=1574109732.004),
    "no timestamp": lambda d: d["_aws"].pop("Timestamp"),
    "directives not an array": lambda d: d["_aws"].update(CloudWatchMetrics={}),
    "empty namespace": lambda d: directive(d).update(Namespace=""),
    "a namespace of spaces": lambda d: directive(d).update(Namespace="   "),
    "a namespace starting with a colon": lambda d: directive(d).update(Namespace=":orders"),
    "no namespace": lambda d: directive(d).pop("Namespace"),
    "dimensions not sets": lambda d: directive(d).update(Dimensions=["functionVersion"]),
    "a dimension not at the root": lambda d: d.pop("functionVersion"),
    "a dimension that is not a string": lambda d: d.update(functionVersion=1),
    "an empty dimension value": lambda d: d.update(functionVersion=""),
    "a dimension value of spaces": lambda d: d.update(functionVersion="   "),
    "a dimension value with a newline": lambda d: d.update(functionVersion="v1\nv2"),
    "a dimension value not ASCII": lambda d: d.update(functionVersion="réglées"),
    "a dimension value of 1025 characters": lambda d: d.update(functionVersion="v" * 1025),
    "31 dimensions in a set": lambda d: (
        directive(d).update(Dimensions=[[f"d{i}" for i in range(31)]]) or d.update({f"d{i}": "x" for i in range(31)})
    ),
    "an unknown unit": lambda d: directive(d)["Metrics"][0].update(Unit="Requests"),
    "a metric not at the root": lambda d: d.pop("time"),
    "a metric that is a string": lambda d: d.update(time="100"),
    "a metric that is a boolean": lambda d: d.update(time=True),
    "101 metrics": lambda d: (
        directive(d).update(Metrics=[{"Name": f"m{i}"} for i in range(101)])
        or d.update({f"m{i}": 1 for i in range(101)})
    ),
    "a metric nested, not at the root": lambda d: (d.pop("time"), d.update(nested={"time": 100})),
}


def test_the_validator_accepts_the_specifications_example():
    validate(SPEC_EXAMPLE)
    validate(broken(lambda d: d.update(time=[1, 2.5])))  # an array of values is a metric too
    with pytest.raises(EMFError, match="no additional data"):
        validate_line(json.dumps(SPEC_EXAMPLE) + " trailing")


@pytest.mark.parametrize("change", BROKEN.values(), ids=BROKEN.keys())
def test_the_validator_refuses_what_the_specification_forbids(change):
    document = broken(change)
    with pytest.raises(EMFError):
        validate(document)


def emitted(out):
    return [validate_line(line) for line in out.splitlines() if line]


def test_every_document_the_processor_writes_is_valid_emf_with_the_summarys_counts(capsys):
    run = run_every_outcome(metrics=True)
    sqs, kinesis = emitted(capsys.readouterr().out)
    assert (sqs["EventSource"], kinesis["EventSource"]) == ("sqs", "kinesis")
    assert sqs["FunctionName"] == kinesis["FunctionName"] == "orders-consumer"  # the Lambda context's
    assert directive(sqs) == {
        "Namespace": DEFAULT_NAMESPACE,
        "Dimensions": [["FunctionName", "EventSource"]],
        "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in METRICS.items()],
    }
    expected = {"Records": 10, "Processed": 3, "Replayed": 1, "Unguarded": 1, "Failed": 3, "LockLost": 1}
    assert {name: sqs[name] for name in expected} == expected
    assert (sqs["InProgress"], sqs["Deferred"], sqs["Skipped"]) == (1, 1, 0)
    assert (kinesis["Records"], kinesis["Failed"], kinesis["Skipped"]) == (2, 1, 1)
    assert sqs["BatchDuration"] > 0
    # The timestamp is the processor's own clock (40 s past its start: the lock-lost record moved it), in ms.
    assert sqs["_aws"]["Timestamp"] == kinesis["_aws"]["Timestamp"] == int(run.clock() * 1000)
    assert sqs["lambda_request_id"] == "7d2a6f0e-5b1c-4e8a-9f3d-every-outcome"


@pytest.mark.parametrize(
    ("event_type", "event", "source"),
    [
        (EventType.SQS, sqs_event(sqs_record("m-1", 1)), "sqs"),
        (EventType.SQS, sqs_event(sqs_record("m-1", 1, group="g")), "sqs_fifo"),
        (EventType.KINESIS, {"Records": [kinesis_record(1, "p", {})]}, "kinesis"),
        (EventType.DYNAMODB_STREAMS, {"Records": [ddb_record(1, "a", {"n": {"N": "1"}})]}, "dynamodb"),
    ],
)
def test_each_event_source_and_both_faces_write_one_valid_document(face, capsys, event_type, event, source):
    clock = FakeClock()
    options = {"metrics": Metrics(namespace="Orders/Payments", function_name="payments")}
    processor = face.processor(event_type, store=InMemoryPersistenceLayer(), clock=clock, **options)
    face.process(event, lambda record: "ok", processor, FakeContext())
    (document,) = emitted(capsys.readouterr().out)
    assert (document["EventSource"], document["FunctionName"]) == (source, "payments")
    assert directive(document)["Namespace"] == "Orders/Payments"
    assert (document["Records"], document["Processed"]) == (1, 1)
    assert document["_aws"]["Timestamp"] == int(clock() * 1000)


def test_metrics_are_off_by_default(capsys):
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    processor.process(sqs_event(sqs_record("m-1", 1)), lambda record: "ok")
    assert capsys.readouterr().out == ""


def test_the_environment_turns_metrics_on_and_names_the_namespace(monkeypatch, capsys):
    monkeypatch.setenv("IDEMPOTENCY_METRICS", "true")
    monkeypatch.setenv("IDEMPOTENCY_METRICS_NAMESPACE", "Shop")
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "from-env")
    on = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    off = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), metrics=False)  # the option wins
    monkeypatch.delenv("IDEMPOTENCY_METRICS")
    default = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), metrics=True)  # the namespace still
    for processor in (on, off, default):
        processor.process(sqs_event(sqs_record("m-1", 1)), lambda record: "ok")  # no context
    documents = emitted(capsys.readouterr().out)
    assert [(directive(d)["Namespace"], d["FunctionName"]) for d in documents] == [("Shop", "from-env")] * 2


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("IDEMPOTENCY_METRICS", "sure"),
        ("IDEMPOTENCY_METRICS_NAMESPACE", "AWS/Lambda"),
        ("IDEMPOTENCY_METRICS_NAMESPACE", "  "),
        ("IDEMPOTENCY_METRICS_NAMESPACE", ":orders"),
    ],
)
def test_an_unusable_environment_value_warns_and_never_stops_the_function(monkeypatch, caplog, capsys, variable, value):
    monkeypatch.setenv("IDEMPOTENCY_METRICS", "1")
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, "idempotent_consumer"):
        processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    (warning,) = [r.getMessage() for r in caplog.records]
    assert variable in warning
    processor.process(sqs_event(sqs_record("m-1", 1)), lambda record: "ok")
    documents = emitted(capsys.readouterr().out)
    if variable == "IDEMPOTENCY_METRICS":
        assert documents == []  # metrics stay off
    else:
        assert [directive(d)["Namespace"] for d in documents] == [DEFAULT_NAMESPACE]


def test_the_metrics_config_is_a_frozen_slotted_dataclass_checked_when_built():
    metrics = Metrics()
    assert dataclasses.is_dataclass(metrics)
    assert not hasattr(metrics, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        metrics.namespace = "Other"  # type: ignore[misc]
    for namespace in ("", "AWS/Lambda", "x" * 256, "orders|payments"):
        with pytest.raises(ValueError, match="namespace"):
            Metrics(namespace=namespace)
    with pytest.raises(ValueError, match="at least one character that is not a space"):
        Metrics(namespace="   ")
    with pytest.raises(ValueError, match="refuses a namespace starting with ':'"):
        Metrics(namespace=":orders")
    assert Metrics(namespace=" orders: v2").namespace == " orders: v2"  # [^:].*, not only spaces: accepted
    for unusable in ("", " ", "orders\nrefunds", "commandes-réglées", "x" * 1025, 42):
        with pytest.raises(ValueError, match="function_name"):
            Metrics(function_name=unusable)  # type: ignore[arg-type]
    assert Metrics(function_name="x" * 1024).function_name == "x" * 1024
    with pytest.raises(TypeError, match="metrics must be"):
        BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), metrics="on")  # type: ignore[arg-type]
    assert DIMENSIONS == ("FunctionName", "EventSource")


def test_standard_output_that_fails_changes_no_outcome(monkeypatch, capsys):
    expected = run_every_outcome()

    class Closed:
        def write(self, text):  # noqa: ARG002 - a closed stream refuses everything
            raise ValueError("I/O operation on closed file")

        def flush(self):
            raise ValueError("I/O operation on closed file")

    monkeypatch.setattr("sys.stdout", Closed())
    run = run_every_outcome(metrics=True)
    monkeypatch.undo()
    assert run.responses == expected.responses
    assert {n: (i.outcome, i.key) for n, i in run.items.items()} == {
        n: (i.outcome, i.key) for n, i in expected.items.items()
    }
    assert "idempotent-consumer: could not write 'the EMF metrics document'" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["orders\tv2", "commandes-réglées", " ", "x" * 1025])
def test_a_function_name_cloudwatch_would_refuse_is_not_used_as_the_dimension(monkeypatch, capsys, name):
    # CloudWatch drops a document whose dimension value it refuses, without an error anywhere: "local" instead.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", name)
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), metrics=True)
    processor.process(sqs_event(sqs_record("m-1", 1)), lambda record: "ok", FakeContext(function_name=name))
    (document,) = emitted(capsys.readouterr().out)
    validate(document)
    assert document["FunctionName"] == "local"
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders")  # the variable when the context's name is unusable
    processor.process(sqs_event(sqs_record("m-2", 2)), lambda record: "ok", FakeContext(function_name=name))
    (document,) = emitted(capsys.readouterr().out)
    assert document["FunctionName"] == "orders"
