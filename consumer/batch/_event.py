"""A batch's event in and its response out: reading the records, the response and summary types, the errors.

:mod:`consumer.batch` and :mod:`consumer.batch._async_batch` share them; users import them from :mod:`consumer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

from consumer._errors import UnexpectedBatchTypeError
from consumer.observability import Item, Outcome
from consumer.sources import EventType, item_identifier, ordering_key, parse_record
from persistence import LockLostError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aws_lambda_typing.events import DynamoDBStreamEvent, KinesisStreamEvent, SQSEvent

    from consumer.batch._summary import BatchSummary
    from consumer.config import IdempotencyConfig
    from consumer.sources._kafka import KafkaItemIdentifier

#: The events a batch processor takes (aws-lambda-typing's TypedDicts; plain dicts work the same).
BatchEvent: TypeAlias = "SQSEvent | KinesisStreamEvent | DynamoDBStreamEvent | Mapping[str, Any]"


class BatchItemFailure(TypedDict):
    """One entry of ``batchItemFailures``: a record's id, or for Kafka its topic-partition and offset."""

    itemIdentifier: str | KafkaItemIdentifier


class PartialBatchResponse(TypedDict):
    """What a handler returns with ``FunctionResponseTypes: [ReportBatchItemFailures]``."""

    batchItemFailures: list[BatchItemFailure]


#: The outcomes that need no redelivery (:attr:`Outcome.succeeded`), as a set: a membership test per record, not a
#: property call.
SUCCEEDED = frozenset(outcome for outcome in Outcome if outcome.succeeded)
#: Each outcome with the summary field that counts it, read once: ``member.value`` is a Python-level property call.
_COUNTED = tuple((outcome, outcome.value) for outcome in Outcome)
_UNCOUNTED = dict.fromkeys((*Outcome, None), 0)  # None: a record left undecided
#: Members read once, by plain names: on Python 3.11 a member read off its class is a property call.
_FAILED, _UNGUARDED, _KAFKA = Outcome.FAILED, Outcome.UNGUARDED, EventType.KAFKA


class Tally:
    """What a batch's records came to, counted once every outcome is decided: the :class:`BatchSummary` is built
    from these counts when it is first read (a log line, metrics, ``processor.summary``), not with every batch."""  # noqa: D205, D209 - one sentence

    __slots__ = ("_built", "_counts", "_duration_ms", "event_type", "lock_lost", "records", "unguarded")

    def __init__(self, event_type: str, items: list[Item], duration_ms: float) -> None:
        """Count ``items`` of the source named ``event_type`` by outcome now (what a hook does to an item later
        changes no count)."""  # noqa: D205, D209 - one sentence
        counts = _UNCOUNTED.copy()
        for item in items:
            counts[item.outcome] += 1
        self._counts = counts
        self.event_type = event_type
        self.records = len(items)
        self.unguarded = counts[_UNGUARDED]  # how many records ran without an idempotency key
        self.lock_lost = 0  # of the failed: their commit was refused, another invocation took the record over
        if counts[_FAILED]:
            self.lock_lost = sum(1 for i in items if i.outcome is _FAILED and isinstance(i.error, LockLostError))
        self._duration_ms = duration_ms
        self._built: BatchSummary | None = None

    @property
    def summary(self) -> BatchSummary:
        """The counts as the public :class:`BatchSummary` (built on the first read, then kept)."""
        if self._built is None:
            from consumer.batch._summary import BatchSummary  # noqa: PLC0415 - with the first summary read

            self._built = BatchSummary(
                event_type=self.event_type,
                records=self.records,
                duration_ms=round(self._duration_ms, 3),
                lock_lost=self.lock_lost,
                **{name: self._counts[outcome] for outcome, name in _COUNTED},
            )
        return self._built


def records_of(event: BatchEvent, event_type: EventType) -> list[Any]:
    """The event's records; an event without them (none at all included: Lambda never sends an empty batch) is
    refused with the words Powertools' ``UnexpectedBatchTypeError`` starts with."""  # noqa: D205, D209 - one sentence
    if event_type is _KAFKA:
        from consumer.sources._kafka import kafka_records  # noqa: PLC0415 - with the first Kafka batch: SQS never needs it

        try:
            records = kafka_records(event if isinstance(event, dict) else {})
        except ValueError as e:
            raise UnexpectedBatchTypeError(
                f"Invalid Kafka event structure: {e}: is this a Kafka event (MSK or self-managed)?"
            ) from e
        if not records:
            raise UnexpectedBatchTypeError("Invalid Kafka event structure: its 'records' object holds no record")
        return records
    listed = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(listed, list):
        raise UnexpectedBatchTypeError(
            "Unexpected batch event type: the event has no 'Records' list: is this a batch (SQS, Kinesis, "
            "DynamoDB Streams; Kafka: EventType.KAFKA)?"
        )
    if not listed:
        raise UnexpectedBatchTypeError("Unexpected batch event type: the event's 'Records' list is empty")
    return listed


def checked_records(records: Any) -> list[Any]:
    """The records handed to ``processor(records, handler)`` (Powertools' older form): the event's list of them."""
    if not isinstance(records, list):
        msg = f"processor(records, handler) takes the event's list of records, got {type(records).__name__}"
        raise UnexpectedBatchTypeError(msg)
    return records


def refuse_kafka_without_cluster(
    event_type: EventType, config: IdempotencyConfig | None, records: list[Any]
) -> list[Any]:
    """``records`` for ``processor(records, handler)``; Kafka records without their cluster are refused.

    Handed without their event, Kafka records carry neither ``eventSourceArn`` nor ``bootstrapServers``: their
    default key (topic, partition, offset) would be every cluster's, and a record of another cluster would replay
    this one's result. A key expression or ``key_header`` says what a key is instead.

    Raises:
        UnexpectedBatchTypeError: A Kafka record without its cluster, under the default key.
    """
    if event_type is not _KAFKA or (config is not None and (config.event_key_jmespath or config.key_header)):
        return records
    for index, raw in enumerate(records):
        if isinstance(raw, dict) and not (raw.get("eventSourceArn") or raw.get("bootstrapServers")):
            msg = (
                f"Kafka record {index} has no eventSourceArn or bootstrapServers: handed without its event, its "
                "default key (topic, partition, offset) names no cluster; pass the event to process(event, handler), "
                "or set event_key_jmespath"
            )
            raise UnexpectedBatchTypeError(msg)
    return records


def _parse_one(event_type: EventType, index: int, raw: Any) -> Item:
    # Without its identifier a record cannot be reported failed: a record that cannot be parsed fails the whole
    # invocation, so the batch is redelivered rather than lose it.
    if not isinstance(raw, dict):
        msg = f"record {index} of the batch is not a {event_type.value} record: not an object, got {type(raw).__name__}"
        raise UnexpectedBatchTypeError(msg)
    try:
        record = parse_record(event_type, raw)
    except KeyError as e:
        msg = f"record {index} of the batch is not a {event_type.value} record: missing {e}"
        raise UnexpectedBatchTypeError(msg) from e
    except (TypeError, AttributeError) as e:
        msg = f"record {index} of the batch is not a {event_type.value} record: a field of the wrong type ({e})"
        raise UnexpectedBatchTypeError(msg) from e
    except ValueError as e:  # a field that is there but unusable (a Kafka value that is not base64)
        msg = f"record {index} of the batch is not a usable {event_type.value} record: {e}"
        raise UnexpectedBatchTypeError(msg) from e
    item_id = item_identifier(record)
    if not isinstance(item_id, str) or not item_id:
        # Lambda could not tell which record failed: fail the invocation, as for a missing identifier.
        raise UnexpectedBatchTypeError(f"record {index} of the batch has no usable identifier: {item_id!r}")
    return Item(raw, record, item_id, ordering_key(record))


def parse(event_type: EventType, raws: list[Any]) -> list[Item]:
    return [_parse_one(event_type, index, raw) for index, raw in enumerate(raws)]
