"""Kafka events (Amazon MSK ``aws:kafka`` and self-managed ``SelfManagedKafka``): their records, typed.

Lambda delivers a Kafka batch as ``{"eventSource": ..., "records": {"<topic>-<partition>": [record, ...], ...}}``:
the records are flattened in the order they come, partition after partition. Each record carries its key and value
base64-encoded (the key may be absent or null, the value null for a tombstone) and its headers as a list of
single-entry objects whose values are arrays of byte integers (signed or unsigned, as the producer's client wrote
them). A header name may repeat: :class:`KafkaHeaders` answers a name with its *last* value, as Kafka's own
``Headers.lastHeader`` does, and :meth:`KafkaHeaders.get_all` with every value in order.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from consumer.sources._raw_view import KeyedByRaw

if TYPE_CHECKING:
    from collections.abc import Sequence

#: The ``eventSource`` of a Kafka event: Amazon MSK, self-managed Apache Kafka.
KAFKA_EVENT_SOURCES = ("aws:kafka", "SelfManagedKafka")
_EVENT_FIELDS = ("eventSource", "eventSourceArn", "bootstrapServers")  # what each flattened record gets of its event
_BYTE_MIN, _BYTE_MAX, _SIGNED_OFFSET = -128, 255, 0xFF


# Lambda's partial batch response for Kafka event sources (MSK and self-managed) names a failed record by an
# object, {"partition": "<topic>-<partition>", "offset": <offset>}, not by a string as for SQS and the streams:
# https://docs.aws.amazon.com/lambda/latest/dg/kafka-retry-configurations.html (ReportBatchItemFailures for Kafka).
# Powertools for AWS Lambda (Python) 3.37 returns the same shape from its Kafka batch support.
class KafkaItemIdentifier(TypedDict):
    """How a Kafka partial batch response names a failed record: its topic-partition and offset."""

    partition: str
    offset: int


def is_kafka_event(event: object) -> bool:
    """Whether ``event`` is a Kafka batch (its ``eventSource`` is MSK's or self-managed Kafka's)."""
    return isinstance(event, Mapping) and event.get("eventSource") in KAFKA_EVENT_SOURCES


def kafka_records(event: Mapping[str, Any]) -> list[Any]:
    """The records of a Kafka event, flattened in order (partition after partition, each in offset order).

    Each record carries its event's source, as SQS and Kinesis records carry theirs: ``eventSource`` and the
    cluster (MSK's ``eventSourceArn``, self-managed Kafka's ``bootstrapServers``). The default key includes the
    cluster: two clusters (or two mappings of one function) may each have an ``orders`` partition 0 at offset 42.
    A self-managed mapping's brokers are sorted (and deduplicated), so reordering them changes no key.
    :func:`as_delivered` gives a record back as the event carries it.

    Raises:
        ValueError: ``records`` is not an object of lists, or ``eventSource`` names another source.
    """
    source = event.get("eventSource")
    if source is not None and source not in KAFKA_EVENT_SOURCES:
        msg = f"the event's eventSource is {source!r}, not a Kafka one ({' or '.join(KAFKA_EVENT_SOURCES)})"
        raise ValueError(msg)
    records = event.get("records")
    if not isinstance(records, Mapping):
        msg = f"the Kafka event has no 'records' object (topic-partition to records), got {type(records).__name__}"
        raise ValueError(msg)  # noqa: TRY004 - the event is unusable, reported as UnexpectedBatchTypeError (a ValueError)
    origin = {field: event[field] for field in _EVENT_FIELDS if field in event}
    if isinstance(origin.get("bootstrapServers"), str):  # part of the default key: the same brokers in any order
        origin["bootstrapServers"] = ",".join(sorted({b.strip() for b in origin["bootstrapServers"].split(",")}))
    flat: list[Any] = []
    for partition, chunk in records.items():
        if not isinstance(chunk, list):
            msg = f"the Kafka event's records of {partition!r} are not a list, got {type(chunk).__name__}"
            raise ValueError(msg)  # noqa: TRY004 - the event is unusable, reported as UnexpectedBatchTypeError (a ValueError)
        flat.extend({**origin, **record} if isinstance(record, Mapping) else record for record in chunk)
    return flat


def folded_name(name: str) -> str:
    """A header name as names are compared: ``A``-``Z`` lowercased, every other character as it is.

    ASCII only, as HTTP compares field names: ``str.casefold()`` reads a name spelled with a KELVIN SIGN (U+212A)
    for its ``k`` as ``idempotency-key``, a name that a filter comparing ASCII names upstream lets through.
    """
    return name.lower() if name.isascii() else name.translate(_ASCII_LOWER)


_ASCII_LOWER = {upper: upper + 32 for upper in range(ord("A"), ord("Z") + 1)}


def as_delivered(record: Any) -> Any:
    """A Kafka record of :func:`kafka_records` as its event carries it: without the event fields it was given.

    Lambda's Kafka records never hold ``eventSource``, ``eventSourceArn`` or ``bootstrapServers`` themselves. A
    record without them, and anything that is not a Kafka record (``topic``, ``partition``, ``offset``), is
    returned as it is.
    """
    if (
        isinstance(record, Mapping)
        and "topic" in record
        and "partition" in record
        and "offset" in record
        and any(field in record for field in _EVENT_FIELDS)
    ):
        return {name: value for name, value in record.items() if name not in _EVENT_FIELDS}
    return record


def header_bytes(value: Any, name: str) -> bytes:
    """A header value as Lambda delivers it (an array of byte integers, signed or unsigned) as ``bytes``.

    Raises:
        ValueError: ``value`` is not such an array.
    """
    if isinstance(value, list):
        if not any(isinstance(b, bool) for b in value):
            try:
                return bytes(value)  # the usual case: unsigned bytes
            except (TypeError, ValueError):
                pass  # signed bytes (a Java producer's), or not bytes at all
        if all(isinstance(b, int) and not isinstance(b, bool) and _BYTE_MIN <= b <= _BYTE_MAX for b in value):
            return bytes(b & _SIGNED_OFFSET for b in value)
    msg = f"header {name!r} is not an array of byte integers"
    raise ValueError(msg)


class KafkaHeaders(Mapping[str, bytes]):
    """A Kafka record's headers by name (ASCII letters in any case), as raw bytes; a repeated name: its last value.

    Values are never decoded as text (``headers[name].decode()`` where you know one is): a binary header reads
    like any other. ``key_header`` keys a value that is not UTF-8 by its bytes (:mod:`consumer.sources._headers`).

    Iterating gives each name once (as first written); :meth:`get_all` gives every value of a name, in order.

    Examples:
        >>> headers = KafkaHeaders([("Idempotency-Key", b"a"), ("trace", b"t"), ("idempotency-key", b"b")])
        >>> headers["IDEMPOTENCY-KEY"], headers.get_all("idempotency-key"), list(headers)
        (b'b', [b'a', b'b'], ['Idempotency-Key', 'trace'])
    """

    __slots__ = ("_all", "_names")

    def __init__(self, pairs: Sequence[tuple[str, bytes]] = ()) -> None:
        """Build the mapping from ``(name, value)`` pairs in record order."""
        self._all: dict[str, list[bytes]] = {}
        self._names: dict[str, str] = {}
        for name, value in pairs:
            folded = folded_name(name)
            self._all.setdefault(folded, []).append(value)
            self._names.setdefault(folded, name)

    @classmethod
    def from_raw(cls, raw: Any) -> KafkaHeaders:
        """Decode Lambda's header list (``[{"name": [104, 105]}, ...]``; absent or null: no headers).

        A header whose value is null (Kafka allows one) is left out: it reads as absent.

        Raises:
            ValueError: The list, an entry or a value is not of that shape.
        """
        if raw is None:
            return cls()
        if not isinstance(raw, list):
            msg = f"headers are not a list, got {type(raw).__name__}"
            raise ValueError(msg)  # noqa: TRY004 - reported as UnexpectedBatchTypeError (a ValueError)
        pairs: list[tuple[str, bytes]] = []
        for entry in raw:
            if not isinstance(entry, Mapping):
                msg = f"a header is not an object, got {type(entry).__name__}"
                raise ValueError(msg)  # noqa: TRY004 - as above
            # Kafka allows a header without a value: null reads as absent, as it does for key_header.
            pairs.extend((str(name), header_bytes(v, str(name))) for name, v in entry.items() if v is not None)
        return cls(pairs)

    def __getitem__(self, name: str) -> bytes:
        """The last value of ``name`` (any case)."""
        return self._all[folded_name(name)][-1]

    def __iter__(self) -> Iterator[str]:
        """Each name once, as first written."""
        return iter(self._names.values())

    def __len__(self) -> int:
        """How many distinct names."""
        return len(self._all)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` (any case) is present."""
        return isinstance(name, str) and folded_name(name) in self._all

    def get_all(self, name: str) -> list[bytes]:
        """Every value of ``name`` (any case), in record order; ``[]`` when absent."""
        return list(self._all.get(folded_name(name), ()))

    def __repr__(self) -> str:
        """The headers, every value shown."""
        return f"KafkaHeaders({[(self._names[k], v) for k, values in self._all.items() for v in values]!r})"


def _b64(raw: Mapping[str, Any], field: str) -> bytes | None:
    value = raw.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        msg = f"{field} is not base64 text, got {type(value).__name__}"
        raise ValueError(msg)  # noqa: TRY004 - reported as UnexpectedBatchTypeError (a ValueError)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        msg = f"{field} is not valid base64: {e}"
        raise ValueError(msg) from e


def _int(raw: Mapping[str, Any], field: str) -> int:
    value = raw[field]  # absent: KeyError, reported as a missing field
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        msg = f"{field} is not a non-negative integer, got {value!r}"
        raise ValueError(msg)
    return value


@dataclass(frozen=True, slots=True)
class KafkaRecord(KeyedByRaw):
    """A Kafka record (Amazon MSK or self-managed Apache Kafka), as Powertools' ``KafkaEventRecord`` has it.

    ``key``, ``value`` and ``headers`` are what the event carries (base64 text, and the headers' list of byte
    arrays); ``decoded_key``, ``decoded_value`` and ``decoded_headers`` are their decoded forms, checked when the
    record is read (a record whose key or value is not base64 is refused then). ``record["topic"]`` and the like
    read the record as its event carries it.

    ``raw`` is the record as Lambda sent it; in a batch, with its event's ``eventSource`` and cluster
    (``eventSourceArn``, ``bootstrapServers``), which keys select (see :func:`kafka_records`).

    Attributes:
        topic: The topic.
        partition: The partition number.
        offset: The record's offset in its partition.
        timestamp: Epoch milliseconds.
        timestamp_type: ``CREATE_TIME`` or ``LOG_APPEND_TIME``.
        decoded_key: The record key, decoded; ``None`` when the producer set none.
        decoded_value: The record value, decoded; ``None`` for a tombstone (null value).
        decoded_headers: The headers by name (ASCII letters in any case), each value its raw bytes (never decoded
            as text, so a binary value reads as well as any; a repeated name answers its last value,
            ``decoded_headers.get_all(name)`` gives every one).
    """

    _ADDED = frozenset(_EVENT_FIELDS)  # record["eventSource"] and the like: the event's, not the record's

    raw: Mapping[str, Any]
    topic: str
    partition: int
    offset: int
    timestamp: int | None
    timestamp_type: str | None
    decoded_key: bytes | None
    decoded_value: bytes | None
    decoded_headers: KafkaHeaders

    @property
    def key(self) -> str | None:
        """The record key as the event carries it: base64 text; ``None`` when the producer set none."""
        key: str | None = self.raw.get("key")
        return key

    @property
    def value(self) -> str | None:
        """The record value as the event carries it: base64 text; ``None`` for a tombstone."""
        value: str | None = self.raw.get("value")
        return value

    @property
    def headers(self) -> list[dict[str, list[int]]] | None:
        """The headers as the event carries them: single-entry objects of byte arrays (``None`` when absent)."""
        headers: list[dict[str, list[int]]] | None = self.raw.get("headers")
        return headers

    @property
    def topic_partition(self) -> str:
        """``<topic>-<partition>``: the ordering key, and how Lambda names the partition."""
        return f"{self.topic}-{self.partition}"

    @property
    def text(self) -> str:
        """The decoded value as UTF-8 text (``""`` for a tombstone)."""
        return (self.decoded_value or b"").decode()

    @property
    def json_value(self) -> Any:
        """The decoded value parsed as JSON (parsed on each access).

        Raises:
            ValueError: The value is a tombstone or not JSON.
        """
        if self.decoded_value is None:
            msg = f"Kafka record {self.topic_partition}@{self.offset} is a tombstone (null value): no JSON"
            raise ValueError(msg)
        return json.loads(self.decoded_value)

    def item_identifier(self) -> KafkaItemIdentifier:
        """How Lambda's partial batch response names this record."""
        return {"partition": self.topic_partition, "offset": self.offset}

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> KafkaRecord:
        """Decode a raw Kafka record.

        Raises:
            KeyError: ``topic``, ``partition`` or ``offset`` is missing.
            ValueError: A field is there but unusable (the key or value is not base64, a header not bytes),
                the message naming the record.
        """
        topic, partition, offset = raw["topic"], _int(raw, "partition"), _int(raw, "offset")
        if not isinstance(topic, str) or not topic:
            msg = f"topic is not a name, got {topic!r}"
            raise ValueError(msg)
        try:
            key, value, headers = _b64(raw, "key"), _b64(raw, "value"), KafkaHeaders.from_raw(raw.get("headers"))
        except ValueError as e:
            msg = f"Kafka record {topic}-{partition}@{offset}: {e}"
            raise ValueError(msg) from e
        timestamp = raw.get("timestamp")
        return cls(
            raw=raw,
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp=timestamp if isinstance(timestamp, int) else None,
            timestamp_type=raw.get("timestampType"),
            decoded_key=key,
            decoded_value=value,
            decoded_headers=headers,
        )
