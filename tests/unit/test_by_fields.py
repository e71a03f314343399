"""The public frozen dataclasses are shown, compared and hashed as generated methods would, by methods written once
(persistence._fields.ByFields): no method of theirs is compiled when their module is imported."""

from __future__ import annotations

import dataclasses

import pytest

from consumer import BatchSummary, DynamoDBStreamRecord, IdempotencyConfig, KinesisRecord, SQSRecord
from consumer._output import HookRecord
from persistence import AttributeNames, IdempotencyRecord, RecordStatus

RECORD = IdempotencyRecord("k", RecordStatus.COMPLETE, 10, lease="l", response="1")
INSTANCES = [
    RECORD,
    HookRecord.of(RECORD),
    AttributeNames(lease="fence"),
    IdempotencyConfig(event_key_jmespath="messageId"),
    BatchSummary("sqs", 3, 1, 1, 0, 1, 0, 0, 0, 1.5),
    SQSRecord.from_raw({"messageId": "m", "body": "{}"}),
    KinesisRecord.from_raw({"eventID": "e", "kinesis": {"sequenceNumber": "1", "partitionKey": "p", "data": ""}}),
    DynamoDBStreamRecord.from_raw({"eventID": "e", "dynamodb": {"SequenceNumber": "1", "Keys": {"k": {"N": "1"}}}}),
]


def _generated(instance: object) -> type:
    """The same fields as a dataclass with generated methods, for comparison."""
    names = [(f.name, object, dataclasses.field(repr=f.repr, compare=f.compare)) for f in dataclasses.fields(instance)]
    return dataclasses.make_dataclass(type(instance).__qualname__, names, frozen=True)


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: type(i).__name__)
def test_shown_compared_and_hashed_as_a_generated_dataclass_would_be(instance):
    twin_class = _generated(instance)
    twin = twin_class(**{f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)})
    assert repr(instance) == repr(twin)
    assert instance == dataclasses.replace(instance)
    assert instance != twin  # another class: never equal, as generated
    first = next(f for f in dataclasses.fields(instance) if f.compare and f.init)
    changed = dataclasses.replace(instance, **{first.name: "other"})
    assert instance != changed
    assert (changed == instance) is False
    try:
        expected = hash(twin)
    except TypeError:  # a field holds a dict (a record's raw event): unhashable, as generated
        with pytest.raises(TypeError):
            hash(instance)
    else:
        assert hash(instance) == expected
    assert not type(instance).__dataclass_params__.eq  # nothing generated: ByFields' methods serve it
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, first.name, "other")
