"""Kinesis Data Streams and DynamoDB Streams records: loaded with the first stream batch or the first use of a name.

An SQS function never builds these two classes (a frozen dataclass's methods are generated when its class is
made): :mod:`consumer.sources` imports this module when a stream batch is parsed or one of its names is read.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from typing import TYPE_CHECKING, Any

from consumer.sources._attribute_values import deserialize_item
from consumer.sources._raw_view import StreamRecord
from persistence._fields import ByFields

if TYPE_CHECKING:
    from aws_lambda_typing.events.dynamodb_stream import DynamodbRecord
    from aws_lambda_typing.events.kinesis_stream import KinesisStreamRecord

    from consumer.sources._record_views import KinesisPayload, StreamRecordView


@dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=False)  # shown, compared, hashed: ByFields
class KinesisRecord(StreamRecord, ByFields):
    """A Kinesis Data Streams record; ``record["kinesis"]`` reads its raw event.

    Attributes:
        event_id: ``shardId:sequenceNumber``.
        sequence_number: What ``batchItemFailures`` names; Lambda resumes from the lowest one reported.
        partition_key: The ordering key.
    """

    raw: KinesisStreamRecord
    event_id: str
    sequence_number: str
    partition_key: str

    @property
    def data(self) -> bytes:
        """The payload, base64-decoded.

        Raises:
            ValueError: The data is not valid base64 (names the sequence number).
        """
        try:
            return base64.b64decode(self.raw["kinesis"]["data"], validate=True)
        except (binascii.Error, ValueError) as e:
            msg = f"Kinesis record {self.sequence_number}: data is not valid base64: {e}"
            raise ValueError(msg) from e

    @property
    def text(self) -> str:
        """The payload as UTF-8 text."""
        return self.data.decode()

    @property
    def json_data(self) -> Any:
        """The payload parsed as JSON."""
        return json.loads(self.data)

    @property
    def kinesis(self) -> KinesisPayload:
        """Powertools' shape of the payload: ``record.kinesis.data_as_text()`` and the like."""
        from consumer.sources._record_views import KinesisPayload  # noqa: PLC0415 - by the first use: SQS never needs it

        return KinesisPayload(self)

    @classmethod
    def from_raw(cls, raw: KinesisStreamRecord) -> KinesisRecord:
        """Wrap a raw Kinesis record."""
        kinesis = raw["kinesis"]
        return cls(raw, raw.get("eventID", ""), kinesis["sequenceNumber"], kinesis.get("partitionKey", ""))


@dataclasses.dataclass(frozen=True, slots=True, repr=False, eq=False)  # shown, compared, hashed: ByFields
class DynamoDBStreamRecord(StreamRecord, ByFields):
    """A DynamoDB Streams record, with its images as plain dicts (numbers as ``int`` or ``Decimal``).

    ``record["dynamodb"]`` reads its raw event; ``keys`` is the item's key attributes, not the raw event's names
    (those are ``record.raw.keys()``).

    Attributes:
        event_id: The stream record's id.
        event_name: ``INSERT``, ``MODIFY`` or ``REMOVE``.
        sequence_number: What ``batchItemFailures`` names.
        keys: The item's key attributes (the ordering key).
    """

    raw: DynamodbRecord
    event_id: str
    event_name: str
    sequence_number: str
    keys: dict[str, Any]  # type: ignore[assignment] # the item's keys (typed attribute); the raw names: raw.keys()

    @property
    def new_image(self) -> dict[str, Any] | None:
        """The item after the change, if the stream carries it."""
        image = self.raw["dynamodb"].get("NewImage")
        return None if image is None else deserialize_item(image)

    @property
    def old_image(self) -> dict[str, Any] | None:
        """The item before the change, if the stream carries it."""
        image = self.raw["dynamodb"].get("OldImage")
        return None if image is None else deserialize_item(image)

    @property
    def dynamodb(self) -> StreamRecordView:
        """Powertools' shape of the change: ``record.dynamodb.new_image`` and the like (plain values)."""
        from consumer.sources._record_views import StreamRecordView  # noqa: PLC0415 - by the first use: SQS never needs it

        return StreamRecordView(self)

    @classmethod
    def from_raw(cls, raw: DynamodbRecord) -> DynamoDBStreamRecord:
        """Wrap a raw DynamoDB Streams record."""
        stream = raw["dynamodb"]
        keys = deserialize_item(stream.get("Keys") or {})
        return cls(raw, raw.get("eventID", ""), raw.get("eventName", ""), stream["SequenceNumber"], keys)
