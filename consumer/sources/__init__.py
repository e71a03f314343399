"""Event sources: their records as typed objects, the id Lambda expects back, and their ordering keys.

The sources wing owns what each source delivers: SQS here, Kinesis and DynamoDB Streams records (``_streams``),
Kafka's records and headers (``_kafka``), the header a key is read from (``_headers``), Powertools-shaped views of
Kinesis and stream records (``_record_views``), DynamoDB's attribute values (``_attribute_values``) and what a key
selection that selected nothing says about the record (``_missing_key``). Those modules load with the first record,
batch or key that needs them; the stream records' and Kafka's names are this module's too (``KinesisRecord``,
``kafka_records``, ``as_delivered``, ...), loaded on first use, so other wings reach them here. It may import the
core and ``persistence``, no other wing.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

from consumer._serde import canonical_json
from consumer.sources._raw_view import KeyedByRaw, StreamRecord
from persistence._fields import ByFields
from persistence._shadowing import imported_on_first_use

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aws_lambda_typing.events.dynamodb_stream import DynamodbRecord
    from aws_lambda_typing.events.kinesis_stream import KinesisStreamRecord
    from aws_lambda_typing.events.sqs import SQSMessage

    from consumer.sources._kafka import KafkaHeaders as KafkaHeaders
    from consumer.sources._kafka import KafkaItemIdentifier as KafkaItemIdentifier
    from consumer.sources._kafka import KafkaRecord as KafkaRecord
    from consumer.sources._kafka import as_delivered as as_delivered
    from consumer.sources._kafka import is_kafka_event as is_kafka_event
    from consumer.sources._kafka import kafka_records as kafka_records
    from consumer.sources._streams import DynamoDBStreamRecord as DynamoDBStreamRecord
    from consumer.sources._streams import KinesisRecord as KinesisRecord

#: Names whose modules load with the first use of one (PEP 562): SQS never needs the stream or Kafka records.
_IMPORTED_ON_FIRST_USE = {
    **dict.fromkeys(("KinesisRecord", "DynamoDBStreamRecord"), "consumer.sources._streams"),
    **dict.fromkeys(
        ("KafkaHeaders", "KafkaItemIdentifier", "KafkaRecord", "as_delivered", "is_kafka_event", "kafka_records"),
        "consumer.sources._kafka",
    ),
}

__getattr__, __dir__ = imported_on_first_use(globals(), _IMPORTED_ON_FIRST_USE)

__all__ = [  # what `from consumer.sources import *` gives: the names imported on first use included
    "HEADERLESS_SOURCES",
    "DynamoDBStreamRecord",
    "EventType",
    "KafkaHeaders",
    "KafkaItemIdentifier",
    "KafkaRecord",
    "KinesisRecord",
    "Record",
    "RecordT",
    "SQSRecord",
    "as_delivered",
    "failure_identifier",
    "is_kafka_event",
    "item_identifier",
    "kafka_records",
    "ordering_key",
    "parse_record",
    "refuse_key_header",
    "resolve_event_type",
]


class EventType(str, enum.Enum):
    """The batch sources the processor reads. ``SQS`` becomes ``SQS_FIFO`` for a ``.fifo`` queue's records.

    ``KinesisDataStreams``, ``DynamoDBStreams`` and ``Kafka`` are Powertools' names, aliases of ``KINESIS``,
    ``DYNAMODB_STREAMS`` and ``KAFKA`` (the same members: ``EventType.KinesisDataStreams is EventType.KINESIS``).
    ``KAFKA`` reads Amazon MSK (``eventSource`` ``aws:kafka``) and self-managed Apache Kafka (``SelfManagedKafka``).
    """

    SQS = "sqs"
    SQS_FIFO = "sqs_fifo"
    KINESIS = "kinesis"
    DYNAMODB_STREAMS = "dynamodb"
    KinesisDataStreams = "kinesis"  # noqa: PIE796 - an alias by design: Powertools' name for KINESIS
    DynamoDBStreams = "dynamodb"  # noqa: PIE796 - Powertools' name for DYNAMODB_STREAMS
    KAFKA = "kafka"
    Kafka = "kafka"  # noqa: PIE796 - Powertools' name for KAFKA


@dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=False)  # shown, compared, hashed: ByFields
class SQSRecord(KeyedByRaw, ByFields):
    """An SQS message. ``raw`` is the record exactly as Lambda delivered it; ``record["body"]`` reads it too.

    Attributes:
        message_id: The message id (what ``batchItemFailures`` names).
        body: The body text.
        message_group_id: The FIFO group, ``None`` on a standard queue.
        receive_count: How many times SQS has delivered the message.
    """

    raw: SQSMessage
    message_id: str
    body: str
    message_group_id: str | None
    receive_count: int

    @property
    def json_body(self) -> Any:
        """The body parsed as JSON (parsed on each access)."""
        return json.loads(self.body)

    def key_data(self) -> dict[str, Any]:
        """The message as idempotency keys see it: its raw event without what changes from one delivery to the
        next (``receiptHandle``, the ``Approximate*`` attributes)."""  # noqa: D205, D209 - one sentence
        raw: dict[str, Any] = {k: v for k, v in self.raw.items() if k != "receiptHandle"}
        attributes = raw.get("attributes")
        if isinstance(attributes, dict):
            raw["attributes"] = {k: v for k, v in attributes.items() if not k.startswith("Approximate")}
        return raw

    @classmethod
    def from_raw(cls, raw: SQSMessage) -> SQSRecord:
        """Wrap a raw SQS record."""
        attributes = raw.get("attributes") or {}
        build = _new_sqs_record if cls is SQSRecord else cls  # a subclass: its own __init__
        return build(
            raw,
            raw["messageId"],
            raw.get("body") or "",
            attributes.get("MessageGroupId"),
            int(attributes.get("ApproximateReceiveCount", 1)),
        )


_new = object.__new__
#: Each field's slot of an SQS record, set directly (see :func:`_new_sqs_record`), in the order of the fields.
_SET_RAW, _SET_MESSAGE_ID, _SET_BODY, _SET_GROUP, _SET_RECEIVE_COUNT = (
    SQSRecord.__dict__[field.name].__set__ for field in dataclasses.fields(SQSRecord)
)


def _new_sqs_record(raw: SQSMessage, message_id: str, body: str, group: str | None, receive_count: int) -> SQSRecord:
    """``SQSRecord(raw, message_id, ...)``: the same record (equal, same hash), built at about half the cost.

    Every SQS record of a batch is built so. A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, which looks the field up on the class each time; this sets each slot through its
    descriptor, looked up once here (as :func:`persistence._record.new_record` builds the idempotency record).
    """
    record = _new(SQSRecord)
    _SET_RAW(record, raw)
    _SET_MESSAGE_ID(record, message_id)
    _SET_BODY(record, body)
    _SET_GROUP(record, group)
    _SET_RECEIVE_COUNT(record, receive_count)
    return record


Record: TypeAlias = "SQSRecord | KinesisRecord | DynamoDBStreamRecord | KafkaRecord"

#: The typed record a batch processor hands its record handler: ``BatchProcessor(EventType.SQS, ...)`` is a
#: ``BatchProcessor[SQSRecord]``, and mypy rejects a handler of another source's records.
RecordT = TypeVar("RecordT", bound="SQSRecord | KinesisRecord | DynamoDBStreamRecord | KafkaRecord")

if TYPE_CHECKING:  # the event types of each record class (an alias of a member belongs in its list too)
    SQSEventType: TypeAlias = Literal[EventType.SQS, EventType.SQS_FIFO]
    KinesisEventType: TypeAlias = Literal[EventType.KINESIS, EventType.KinesisDataStreams]
    DynamoDBStreamsEventType: TypeAlias = Literal[EventType.DYNAMODB_STREAMS, EventType.DynamoDBStreams]
    KafkaEventType: TypeAlias = Literal[EventType.KAFKA, EventType.Kafka]


_SQS, _SQS_FIFO = EventType.SQS, EventType.SQS_FIFO  # read once: a member read off its class is a call on 3.11
_SQS_TYPES = (_SQS, _SQS_FIFO)


def resolve_event_type(event_type: EventType, records: list[Any]) -> EventType:
    """``SQS`` becomes ``SQS_FIFO`` when the records come from a ``.fifo`` queue."""
    first = records[0] if records else None
    if event_type is _SQS and isinstance(first, dict) and str(first.get("eventSourceARN", "")).endswith(".fifo"):
        return _SQS_FIFO
    return event_type


def parse_record(event_type: EventType, raw: Mapping[str, Any]) -> Record:
    """Wrap ``raw`` as the typed record of ``event_type`` (raises ``KeyError``/``TypeError`` when malformed)."""
    if event_type in _SQS_TYPES:
        return SQSRecord.from_raw(raw)  # type: ignore[arg-type]  # an SQS message; no cast(): a call per record
    if event_type is EventType.KAFKA:
        from consumer.sources._kafka import KafkaRecord  # noqa: PLC0415 - with the first Kafka batch: SQS never needs it

        return KafkaRecord.from_raw(raw)
    from consumer.sources._streams import DynamoDBStreamRecord, KinesisRecord  # noqa: PLC0415 - with the first stream batch

    if event_type is EventType.KINESIS:
        return KinesisRecord.from_raw(cast("KinesisStreamRecord", raw))
    return DynamoDBStreamRecord.from_raw(cast("DynamodbRecord", raw))


def item_identifier(record: Record) -> str:
    """The record's id: SQS ``messageId``, a stream's sequence number, Kafka's ``<topic>-<partition>@<offset>``.

    ``batchItemFailures`` names it by this id, but a Kafka record by an object (see :func:`failure_identifier`).
    """
    if isinstance(record, SQSRecord):
        return record.message_id
    if isinstance(record, StreamRecord):
        return record.sequence_number
    return f"{record.topic_partition}@{record.offset}"


def failure_identifier(record: Record, item_id: str) -> str | KafkaItemIdentifier:
    """What ``batchItemFailures`` names: ``item_id``, but for a Kafka record an object (partition and offset)."""
    if isinstance(record, (SQSRecord, StreamRecord)):
        return item_id
    return record.item_identifier()


def ordering_key(record: Record) -> str | None:
    """Records sharing this key run one after another, in order; ``None``: no ordering."""
    if isinstance(record, SQSRecord):
        return record.message_group_id
    if isinstance(record, StreamRecord):
        from consumer.sources._streams import KinesisRecord  # noqa: PLC0415 - loaded: its stream record is here

        return record.partition_key if isinstance(record, KinesisRecord) else canonical_json(record.keys)
    return record.topic_partition


HEADERLESS_SOURCES = (EventType.KINESIS.value, EventType.DYNAMODB_STREAMS.value)  # records without headers to key on


def refuse_key_header(source: str) -> None:
    """Refuse ``key_header`` for a source whose records have no headers (``source``: an ``EventType`` value).

    Raises:
        ValueError: ``source`` is Kinesis or DynamoDB Streams.
    """
    if source in HEADERLESS_SOURCES:
        msg = f"key_header: {source} records carry no headers; select the key with event_key_jmespath"
        raise ValueError(msg)
