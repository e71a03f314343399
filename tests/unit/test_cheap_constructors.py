"""The per-record path builds its frozen records without their dataclass ``__init__`` (bench/instructions.py counts
it): each cheap constructor gives the very object the public constructor gives, field for field."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.sources import SQSRecord, _new_sqs_record
from persistence import IdempotencyRecord, RecordStatus
from persistence._record import new_record

_text = st.text(max_size=20)
_maybe_text = st.none() | _text
_records = st.tuples(
    _text,
    st.sampled_from([RecordStatus.IN_PROGRESS, RecordStatus.COMPLETE]),
    st.integers(),
    st.none() | st.integers(),
    _text,
    _maybe_text,
    _maybe_text,
)


def _hash(value: object) -> int | str:
    try:
        return hash(value)
    except TypeError as e:  # an SQS record holds its raw dict: unhashable, whichever way it was built
        return str(e)


def _same(built: object, public: object) -> None:
    assert type(built) is type(public)
    assert built == public
    assert _hash(built) == _hash(public)
    assert repr(built) == repr(public)
    assert dataclasses.astuple(built) == dataclasses.astuple(public)  # type: ignore[call-overload]  # dataclasses
    assert pickle.loads(pickle.dumps(built)) == public  # noqa: S301 - our own bytes


@given(_records)
def test_new_record_is_the_record_the_dataclass_builds(fields: tuple[object, ...]) -> None:
    _same(new_record(*fields), IdempotencyRecord(*fields))  # type: ignore[arg-type]  # the strategy's types


@given(st.dictionaries(_text, _text, max_size=3), _text, _text, _maybe_text, st.integers(min_value=0, max_value=10**6))
def test_new_sqs_record_is_the_record_the_dataclass_builds(
    raw: dict[str, str], message_id: str, body: str, group: str | None, count: int
) -> None:
    _same(_new_sqs_record(raw, message_id, body, group, count), SQSRecord(raw, message_id, body, group, count))  # type: ignore[arg-type]  # a plain dict as the message


def test_built_records_stay_frozen() -> None:
    record = new_record("k", RecordStatus.IN_PROGRESS, 1, 2, "lease", None, None)
    message = _new_sqs_record({"messageId": "m"}, "m", "", None, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.key = "other"  # type: ignore[misc]  # the point: refused
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.body = "other"  # type: ignore[misc]  # the point: refused


def test_the_public_constructors_build_the_same_records_as_before() -> None:
    held = IdempotencyRecord.in_progress("k", expires_at=10, lock_deadline_ms=12_345, payload_hash="h")
    assert held == IdempotencyRecord("k", RecordStatus.IN_PROGRESS, 13, 12_345, held.lease, None, "h")
    assert held.completed("r", 99) == IdempotencyRecord("k", RecordStatus.COMPLETE, 99, None, held.lease, "r", "h")
    raw = {"messageId": "m", "body": "b", "attributes": {"MessageGroupId": "g", "ApproximateReceiveCount": "3"}}
    assert SQSRecord.from_raw(raw) == SQSRecord(raw, "m", "b", "g", 3)  # type: ignore[arg-type]  # a plain dict


def test_a_subclass_builds_itself() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(IdempotencyRecord):
        tag: str = "t"

    @dataclasses.dataclass(frozen=True, slots=True)
    class Message(SQSRecord):
        tag: str = "t"

    held = Tagged.in_progress("k", expires_at=10, lock_deadline_ms=12_345)
    assert type(held) is Tagged
    assert held.tag == "t"
    message = Message.from_raw({"messageId": "m"})
    assert type(message) is Message
    assert message.tag == "t"
