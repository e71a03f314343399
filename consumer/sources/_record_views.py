"""Powertools-shaped views of a record: ``record.kinesis``, ``record.dynamodb``.

Code written against Powertools' data classes calls ``record.kinesis.data_as_text()`` and reads
``record.dynamodb.new_image`` or ``record.kinesis["data"]``; all work here as they do there.

Each view reads the typed record it belongs to; nothing is parsed twice or stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumer.sources._raw_view import RawEventView

if TYPE_CHECKING:
    from collections.abc import Mapping

    from consumer.sources import DynamoDBStreamRecord, KinesisRecord


@dataclass(frozen=True, slots=True)
class KinesisPayload(RawEventView):
    """``record.kinesis`` of a :class:`~consumer.KinesisRecord`, as Powertools' ``KinesisStreamRecordPayload``."""

    record: KinesisRecord

    @property
    def raw(self) -> Mapping[str, Any]:
        """The record's raw ``kinesis`` object."""
        return self.record.raw["kinesis"]

    @property
    def data(self) -> str:
        """The payload as the event carries it: base64 text."""
        return str(self.record.raw["kinesis"]["data"])

    @property
    def partition_key(self) -> str:
        """The record's partition key."""
        return self.record.partition_key

    @property
    def sequence_number(self) -> str:
        """The record's sequence number."""
        return self.record.sequence_number

    def data_as_bytes(self) -> bytes:
        """The payload, base64-decoded (:attr:`KinesisRecord.data`)."""
        return self.record.data

    def data_as_text(self) -> str:
        """The payload as UTF-8 text (:attr:`KinesisRecord.text`)."""
        return self.record.text

    def data_as_json(self) -> Any:
        """The payload parsed as JSON (:attr:`KinesisRecord.json_data`)."""
        return self.record.json_data


@dataclass(frozen=True, slots=True)
class StreamRecordView(RawEventView):
    """``record.dynamodb`` of a :class:`~consumer.DynamoDBStreamRecord`, as Powertools' ``StreamRecord``."""

    record: DynamoDBStreamRecord

    @property
    def raw(self) -> Mapping[str, Any]:
        """The record's raw ``dynamodb`` object."""
        return self.record.raw["dynamodb"]

    @property
    def keys(self) -> dict[str, Any]:  # type: ignore[override] # the item's keys, as on Powertools' StreamRecord
        """The item's key attributes, as plain values."""
        return self.record.keys

    @property
    def new_image(self) -> dict[str, Any] | None:
        """The item after the change, as plain values, if the stream carries it."""
        return self.record.new_image

    @property
    def old_image(self) -> dict[str, Any] | None:
        """The item before the change, as plain values, if the stream carries it."""
        return self.record.old_image

    @property
    def sequence_number(self) -> str:
        """The stream record's sequence number."""
        return self.record.sequence_number
