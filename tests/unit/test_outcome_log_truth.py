"""Each log line says what happened, and only that: no line claims a commit that did not land, a hook's failure
is not counted as a record outcome, and an interrupted batch names the exception that stops it."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Iterator

import boto3
import pytest
from botocore.stub import Stubber
from events import sqs_event, sqs_record
from fakes import FakeContext

from consumer import (
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    PowertoolsCutover,
)
from persistence import IdempotencyRecord, InMemoryPersistenceLayer, PersistenceLayerError

LOGGER = logging.getLogger("idempotent_consumer")
TOO_LARGE = "x" * 500_000  # over the 400 KB any store of ours takes
UNTIL = dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)


class Records(logging.Handler):
    """The library's log records, kept."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def outcomes(self, item_identifier: str) -> list[str]:
        return [r.outcome for r in self.records if getattr(r, "item_identifier", None) == item_identifier]


@pytest.fixture
def logged() -> Iterator[Records]:
    records, level = Records(), LOGGER.level
    LOGGER.addHandler(records)
    LOGGER.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        LOGGER.removeHandler(records)
        LOGGER.setLevel(level)


class OutageStore(InMemoryPersistenceLayer):
    """Fails to commit a record without its response; waits on I/O (``blocking``: async guards reach it from a
    thread, through their own commit path)."""

    blocking = True

    def complete(self, record: IdempotencyRecord) -> None:
        if record.response is None:
            raise PersistenceLayerError(f"the store is unreachable: cannot complete {record.key!r}", key=record.key)
        super().complete(record)


@pytest.mark.parametrize("result", [object(), TOO_LARGE], ids=["unstorable", "too-large"])
@pytest.mark.parametrize("commit", ["lock-lost", "store-outage"])
def test_a_result_committed_without_its_response_is_logged_so_only_once_the_commit_landed(face, logged, result, commit):
    store = OutageStore() if commit == "store-outage" else InMemoryPersistenceLayer()
    store.blocking = True  # the async face commits from a thread, through its own commit path
    # An unstorable result meets the outage on its one commit; a too-large one on its second, without it.

    def handler(record, guard):
        if commit == "lock-lost":  # another invocation takes the record over while the body runs
            store.delete(guard.key)
            IdempotencyGuard({"messageId": record.message_id}, store=store).__enter__()
        return result

    processor = face.processor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
    response = face.process(sqs_event(sqs_record("m-1", {})), handler, processor, FakeContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert logged.outcomes("m-1") == ["lock_lost" if commit == "lock-lost" else "failed"]  # one line: the truth


def test_a_result_committed_without_its_response_is_one_line_once_committed(face, logged):
    store = InMemoryPersistenceLayer()
    store.blocking = True
    processor = face.processor(EventType.SQS, store=store)
    face.process(sqs_event(sqs_record("m-1", {})), lambda record: TOO_LARGE, processor, FakeContext())
    assert logged.outcomes("m-1") == ["committed_without_response"]
    assert store.get(processor.items[0].key).response is None


def test_a_powertools_response_kept_without_it_is_logged_so_only_once_our_copy_is_committed(logged):
    # A Powertools record completed with a response too large for our store: our copy is committed without it,
    # and says so only if that commit lands (here the store is down).
    client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    cutover = PowertoolsCutover(table_name="pt", until=UNTIL, key_prefix="p", boto3_client=client)
    item = {"status": {"S": "COMPLETED"}, "expiration": {"N": str(2**40)}, "data": {"S": json.dumps(TOO_LARGE)}}
    stubber = Stubber(client)
    stubber.add_response("get_item", {"Item": item})
    config = IdempotencyConfig(powertools_cutover=cutover)
    processor = BatchProcessor(EventType.SQS, store=OutageStore(), config=config, raise_on_entire_batch_failure=False)
    with stubber:
        response = processor.process(sqs_event(sqs_record("m-1", {})), lambda record: "ran")
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert not [r for r in logged.records if "kept without it" in r.getMessage()]
    assert logged.outcomes("m-1") == ["failed"]


def test_a_hook_that_fails_is_logged_under_an_outcome_of_its_own(face, logged):
    def handler(record):
        if record.message_id == "m-2":
            raise ValueError("declined")
        return "ok"

    def broken(item):
        raise RuntimeError("tracing backend down")

    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), on_outcome=broken)
    event = sqs_event(sqs_record("m-1", {}), sqs_record("m-2", {}))
    assert face.process(event, handler, processor, FakeContext()) == {"batchItemFailures": [{"itemIdentifier": "m-2"}]}
    # A query on outcome counts one failed record and no processed one; each hook failure is a line of its own.
    assert (logged.outcomes("m-1"), logged.outcomes("m-2")) == (["hook_failed"], ["failed", "hook_failed"])
    hook_lines = [r for r in logged.records if getattr(r, "outcome", None) == "hook_failed"]
    assert [r.getMessage().split(":")[0] for r in hook_lines] == [
        "on_outcome hook raised for record m-1 (its outcome, processed, stands)",
        "on_outcome hook raised for record m-2 (its outcome, failed, stands)",
    ]
    assert all(r.exception_type == "RuntimeError" and r.levelno == logging.ERROR for r in hook_lines)


def test_a_hook_that_returns_an_awaitable_is_logged_as_a_hook_failure(logged):
    async def late(item):
        return item

    hook = lambda item: late(item)  # noqa: E731, PLW0108 - a plain def returning a coroutine: late itself is refused
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), on_outcome=hook)
    processor.process(sqs_event(sqs_record("m-1", {})), lambda record: "ok")
    assert logged.outcomes("m-1") == ["hook_failed"]


def interrupted_line(logged: Records) -> logging.LogRecord:
    (line,) = [r for r in logged.records if r.getMessage().startswith("batch interrupted by")]
    return line


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_an_async_batch_a_record_stops_names_the_exception_that_leaves_the_loop(logged, stop):
    async def handler(record):
        if record.message_id == "m-2":
            raise stop
        await asyncio.sleep(60)  # still running when m-2 stops the batch, however late m-2 starts

    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    with pytest.raises(stop):
        asyncio.run(processor.process(sqs_event(sqs_record("m-1", {}), sqs_record("m-2", {})), handler))
    line = interrupted_line(logged)
    assert line.getMessage().startswith(f"batch interrupted by {stop.__name__} with 2 of 2 records undecided")
    assert (line.exception_type, line.exc_info[0]) == (stop.__name__, stop)


def test_an_async_batch_whose_invocation_is_cancelled_names_the_cancellation(logged):
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())

    async def main():
        task = asyncio.ensure_future(processor.process(sqs_event(sqs_record("m-1", {})), lambda r: asyncio.sleep(5)))
        await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert interrupted_line(logged).exception_type == "CancelledError"
