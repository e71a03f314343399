"""A batch's event in and its response out: reading the records, the response and summary types, the errors.

:mod:`consumer.batch` and :mod:`consumer.async_batch` share them; users import them from :mod:`consumer`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

from consumer._batch_run import Item, Outcome
from consumer.event_sources import EventType, item_identifier, ordering_key, parse_record
from persistence import IdempotencyError, LockLostError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aws_lambda_typing.events import DynamoDBStreamEvent, KinesisStreamEvent, SQSEvent

    from consumer._kafka import KafkaItemIdentifier

_ERRORS_SHOWN = 3  # causes named in a BatchProcessingError's message (all are in .errors)


#: The events a batch processor takes (aws-lambda-typing's TypedDicts; plain dicts work the same).
BatchEvent: TypeAlias = "SQSEvent | KinesisStreamEvent | DynamoDBStreamEvent | Mapping[str, Any]"


class BatchItemFailure(TypedDict):
    """One entry of ``batchItemFailures``: a record's id, or for Kafka its topic-partition and offset."""

    itemIdentifier: str | KafkaItemIdentifier


class PartialBatchResponse(TypedDict):
    """What a handler returns with ``FunctionResponseTypes: [ReportBatchItemFailures]``."""

    batchItemFailures: list[BatchItemFailure]


class BatchEventError(IdempotencyError, ValueError):
    """The event as a whole is unusable (no ``Records``, a record without its identifier)."""


class BatchProcessingError(IdempotencyError):
    """Every record of the batch failed. ``errors`` maps each record's identifier to its cause.

    Attributes:
        errors: ``(item identifier, exception)`` for every failed record.
        response: The partial batch response that would have been returned.
    """

    def __init__(self, errors: list[tuple[str, BaseException]], response: PartialBatchResponse) -> None:
        """Build the error from every record's cause."""
        shown = "; ".join(f"{item_id}: {error!r}" for item_id, error in errors[:_ERRORS_SHOWN])
        more = "; ..." if len(errors) > _ERRORS_SHOWN else ""
        super().__init__(f"all {len(errors)} records failed ({shown}{more})")
        self.errors = errors
        self.response = response


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What one invocation did with its batch."""

    event_type: str
    records: int
    processed: int
    replayed: int
    unguarded: int
    failed: int
    in_progress: int
    skipped: int
    deferred: int
    duration_ms: float
    lock_lost: int = 0  # of the failed: their commit was refused, another invocation took the record over


def summarize(event_type: EventType, items: list[Item], duration_ms: float) -> BatchSummary:
    counts = Counter(item.outcome for item in items)
    lost = 0
    if counts[Outcome.FAILED]:
        lost = sum(1 for i in items if i.outcome is Outcome.FAILED and isinstance(i.error, LockLostError))
    return BatchSummary(
        event_type=event_type.value,
        records=len(items),
        duration_ms=round(duration_ms, 3),
        lock_lost=lost,
        **{outcome.value: counts[outcome] for outcome in Outcome},
    )


def records_of(event: BatchEvent, event_type: EventType) -> list[Any]:
    if event_type is EventType.KAFKA:
        from consumer._kafka import kafka_records  # noqa: PLC0415 - with the first Kafka batch: SQS never needs it

        try:
            return kafka_records(event if isinstance(event, dict) else {})
        except ValueError as e:
            raise BatchEventError(f"{e}: is this a Kafka event (MSK or self-managed)?") from e
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        raise BatchEventError(
            "the event has no 'Records' list: is this a batch (SQS, Kinesis, DynamoDB Streams; Kafka: EventType.KAFKA)?"
        )
    return records


def checked_records(records: Any) -> list[Any]:
    """The records handed to ``processor(records, handler)`` (Powertools' older form): the event's list of them."""
    if not isinstance(records, list):
        msg = f"processor(records, handler) takes the event's list of records, got {type(records).__name__}"
        raise BatchEventError(msg)
    return records


def _parse_one(event_type: EventType, index: int, raw: Any) -> Item:
    # Without its identifier a record cannot be reported failed: a record that cannot be parsed fails the whole
    # invocation, so the batch is redelivered rather than lose it.
    if not isinstance(raw, dict):
        msg = f"record {index} of the batch is not a {event_type.value} record: not an object, got {type(raw).__name__}"
        raise BatchEventError(msg)
    try:
        record = parse_record(event_type, raw)
    except KeyError as e:
        raise BatchEventError(f"record {index} of the batch is not a {event_type.value} record: missing {e}") from e
    except (TypeError, AttributeError) as e:
        msg = f"record {index} of the batch is not a {event_type.value} record: a field of the wrong type ({e})"
        raise BatchEventError(msg) from e
    except ValueError as e:  # a field that is there but unusable (a Kafka value that is not base64)
        raise BatchEventError(f"record {index} of the batch is not a usable {event_type.value} record: {e}") from e
    item_id = item_identifier(record)
    if not isinstance(item_id, str) or not item_id:
        # Lambda could not tell which record failed: fail the invocation, as for a missing identifier.
        raise BatchEventError(f"record {index} of the batch has no usable identifier: {item_id!r}")
    return Item(raw, record, item_id, ordering_key(record))


def parse(event_type: EventType, raws: list[Any]) -> list[Item]:
    return [_parse_one(event_type, index, raw) for index, raw in enumerate(raws)]
