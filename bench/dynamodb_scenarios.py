"""DynamoDB scenarios: requests per record (against DynamoDB Local), and latency when every call takes
10 ms (a botocore hook answers each request after 10 ms, so the server's own speed does not count)."""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

import libraries
from dynamodb_local import canned_answer

from consumer.local_context import LocalContext

if TYPE_CHECKING:
    from botocore.awsrequest import AWSResponse

DELAY_S = 0.010


class SlowDynamoDB:
    """Answers every write after ``delay_s`` with DynamoDB's empty success, in place of a server.

    DynamoDB Local serves one request at a time at a few milliseconds each, which would hide what a
    client does in parallel; real DynamoDB serves concurrent requests concurrently.
    """

    def __init__(self, client: Any, delay_s: float) -> None:
        self.delay_s = delay_s
        client.meta.events.register("before-send.dynamodb.*", self._answer)

    def _answer(self, request: Any, **_: Any) -> AWSResponse:
        time.sleep(self.delay_s)
        return canned_answer(request.url, 200, b"{}")


class Traffic:
    """Counts (and optionally delays) every request a client sends."""

    def __init__(self, client: Any, delay_s: float = 0.0) -> None:
        self.sent = 0
        self.delay_s = delay_s
        client.meta.events.register("before-send.dynamodb.*", self._before_send)

    def _before_send(self, **_: Any) -> None:
        self.sent += 1
        if self.delay_s:
            time.sleep(self.delay_s)


def _stores(server: Any, delay_s: float = 0.0) -> tuple[Any, Any, Traffic, Traffic]:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer as PowertoolsDynamoDB

    from persistence import DynamoDBPersistenceLayer

    ours_client, their_client = server.client(), server.client()
    ours_traffic, their_traffic = Traffic(ours_client, delay_s), Traffic(their_client, delay_s)
    ours = DynamoDBPersistenceLayer(table_name=server.create_table(), boto3_client=ours_client)
    theirs = PowertoolsDynamoDB(table_name=server.create_table(), boto3_client=their_client)
    return ours, theirs, ours_traffic, their_traffic


def _per_record(traffic: Traffic, handler: Any, event: dict[str, Any]) -> float:
    before = traffic.sent
    handler(event, LocalContext(timeout_ms=900_000))
    return (traffic.sent - before) / len(event["Records"])


def requests(server: Any) -> list[Any]:
    """Requests per record: a first delivery, a redelivery, and a redelivery with the local cache on.

    The cached redelivery runs on new stores (new tables, new clients) configured with ``use_local_cache=True``
    from the start: a Powertools store keeps the configuration of the first ``@idempotent_function`` that used it
    (``BasePersistenceLayer.configure`` returns early once configured), so reusing the store of the uncached rows
    would leave its cache off.
    """
    from run import Row

    ours_store, their_store, ours_traffic, their_traffic = _stores(server)
    event = libraries.sqs_event(10)
    ours, theirs = libraries.ours(ours_store), libraries.powertools(their_store)
    first = (_per_record(ours_traffic, ours, event), _per_record(their_traffic, theirs, event))
    again = (_per_record(ours_traffic, ours, event), _per_record(their_traffic, theirs, event))
    ours_store, their_store, ours_traffic, their_traffic = _stores(server)
    cached_ours = libraries.ours(ours_store, use_local_cache=True)
    cached_theirs = libraries.powertools(their_store, use_local_cache=True)
    warm = libraries.sqs_event(10, offset=100)
    _per_record(ours_traffic, cached_ours, warm), _per_record(their_traffic, cached_theirs, warm)
    cached = (_per_record(ours_traffic, cached_ours, warm), _per_record(their_traffic, cached_theirs, warm))
    return [
        Row("DynamoDB requests/record, first delivery", first[0], first[1], "requests", None, "2", first[0] == 2),
        Row("DynamoDB requests/record, redelivery", again[0], again[1], "requests", None, "1", again[0] == 1),
        Row("DynamoDB requests/record, cached redelivery", cached[0], cached[1], "requests", None, "0", cached[0] == 0),
    ]


def latency(server: Any, records: int) -> list[Any]:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer as PowertoolsDynamoDB
    from run import Row

    from persistence import DynamoDBPersistenceLayer

    ours_client, their_client = server.client(), server.client()
    SlowDynamoDB(ours_client, DELAY_S), SlowDynamoDB(their_client, DELAY_S)
    ours_store = DynamoDBPersistenceLayer(table_name="Simulated", boto3_client=ours_client)
    their_store = PowertoolsDynamoDB(table_name="Simulated", boto3_client=their_client)
    round_trips = []
    for _ in range(5):
        started = time.perf_counter()
        ours_client.put_item(TableName="Simulated", Item={"id": {"S": "x"}})
        round_trips.append(time.perf_counter() - started)
    floor_ms = 2 * statistics.median(round_trips) * 1000

    def timed(handler: Any, offset: int) -> float:
        started = time.perf_counter()
        handler(libraries.sqs_event(records, offset=offset), LocalContext(timeout_ms=900_000))
        return (time.perf_counter() - started) * 1000

    ours = libraries.ours(ours_store, max_workers=records)
    theirs = libraries.powertools(their_store)
    ours_ms = min(timed(ours, 1000 * (i + 1)) for i in range(3))
    their_ms = min(timed(theirs, 1000 * (i + 1)) for i in range(3))
    ratio = ours_ms / their_ms
    return [
        Row(f"latency, {records}-record batch, +10 ms per DynamoDB call", round(ours_ms, 1), round(their_ms, 1), "ms",
            round(ratio, 3), "<= 0.2x", ratio <= 0.2, plot="latency", records=records),
        Row("latency: floor, 2 round trips of 10 ms", round(floor_ms, 1), "-", "ms", None, "-", True, plot="floor"),
        Row("latency: ours / floor (2 round trips + handler)", round(ours_ms / floor_ms, 2), "-", "x", None, "<= 1.5x",
            ours_ms / floor_ms <= 1.5),
    ]  # fmt: skip
