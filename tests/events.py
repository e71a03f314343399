"""Batch events in the shapes AWS documents, built for tests."""

from __future__ import annotations

import base64
import json
from typing import Any

QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
STREAM_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/clicks"


def sqs_record(
    message_id: str, body: Any, *, group: str | None = None, receive_count: int = 1, raw_body: bool = False
) -> dict[str, Any]:
    """An SQS record whose body is ``body`` as JSON (or as given, with ``raw_body``)."""
    attributes = {"ApproximateReceiveCount": str(receive_count), "SentTimestamp": "1700000000000"}
    if group is not None:
        attributes |= {"MessageGroupId": group, "SequenceNumber": "1", "MessageDeduplicationId": message_id}
    return {
        "messageId": message_id,
        "receiptHandle": f"handle-{message_id}",
        "body": body if raw_body else json.dumps(body),
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": "0" * 32,
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN + (".fifo" if group is not None else ""),
        "awsRegion": "eu-west-1",
    }


def sqs_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def kinesis_record(seq: int, partition_key: str, payload: Any, *, raw_data: str | None = None) -> dict[str, Any]:
    data = raw_data if raw_data is not None else base64.b64encode(json.dumps(payload).encode()).decode()
    sequence = f"4959{seq:020d}"
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": partition_key,
            "sequenceNumber": sequence,
            "data": data,
            "approximateArrivalTimestamp": 1700000000.0,
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"shardId-000000000000:{sequence}",
        "eventName": "aws:kinesis:record",
        "eventSourceARN": STREAM_ARN,
        "awsRegion": "eu-west-1",
    }


def ddb_record(seq: int, pk: str, new_image: dict[str, Any] | None, event_name: str = "MODIFY") -> dict[str, Any]:
    stream: dict[str, Any] = {
        "Keys": {"pk": {"S": pk}},
        "SequenceNumber": f"{seq:021d}",
        "SizeBytes": 64,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
        "ApproximateCreationDateTime": 1700000000,
    }
    if new_image is not None:
        stream["NewImage"] = new_image
    return {
        "eventID": f"ddb-{seq}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "eu-west-1",
        "dynamodb": stream,
        "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/accounts/stream/2026-01-01T00:00:00.000",
    }


def failures(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


MSK_ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/orders/a1b2c3d4-5678-90ab-cdef-1234567890ab-2"


def kafka_record(
    topic: str,
    partition: int,
    offset: int,
    value: Any = None,
    *,
    key: bytes | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    raw_value: str | None = None,
) -> dict[str, Any]:
    """A Kafka record as Lambda delivers it: ``value`` as JSON (bytes as they are), base64; headers as byte arrays."""
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    record: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": 1700000000000 + offset,
        "timestampType": "CREATE_TIME",
        "value": raw_value if raw_value is not None else base64.b64encode(data).decode(),
        "headers": [{name: list(value) for name, value in [pair]} for pair in headers or []],
    }
    if key is not None:
        record["key"] = base64.b64encode(key).decode()
    return record


def kafka_event(*records: dict[str, Any], self_managed: bool = False) -> dict[str, Any]:
    """An MSK (or self-managed Kafka) event: the records grouped by ``<topic>-<partition>``, each group in order."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        grouped.setdefault(f"{record['topic']}-{record['partition']}", []).append(record)
    if self_managed:
        return {"eventSource": "SelfManagedKafka", "bootstrapServers": "b-1.kafka:9092,b-2.kafka:9092",
                "records": grouped}  # fmt: skip
    return {"eventSource": "aws:kafka", "eventSourceArn": MSK_ARN, "bootstrapServers": "b-1.msk:9098",
            "records": grouped}  # fmt: skip


def kafka_failures(response: dict[str, Any]) -> list[tuple[str, int]]:
    return [(f["itemIdentifier"]["partition"], f["itemIdentifier"]["offset"]) for f in response["batchItemFailures"]]
