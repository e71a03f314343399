"""Findings of a third review, of the two changes that made the invocation and the import faster: each a test of
the promise that every record ends committed after its body ran once, reported in batchItemFailures (or raised), or
replayed from a committed record. Each test names the ending it defends.
"""

from __future__ import annotations

import contextvars
import enum
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fakes import FakeClock, FakeContext

from consumer import (
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    current_lambda_context,
    idempotent_function,
    process_partial_response,
    register_lambda_context,
)
from persistence import InMemoryPersistenceLayer, SQLitePersistenceLayer

# -- invocations closed out of order: a finished invocation's context outlived both, and set the next one's lock ----


def test_invocations_closed_out_of_order_leave_no_finished_context_to_set_the_next_lock(tmp_path):
    """Ending: committed after its body ran once. Two registrations closed in the order they opened (a middleware
    and a handler, each without ``with``) left the first one's context in the thread's context variable after both
    had closed; it came before the next invocation's Powertools-style registration, so the next lock took the
    finished invocation's deadline (0 ms left: the grace only), expired while its body ran, and a redelivery ran the
    body a second time."""
    store, clock = SQLitePersistenceLayer(str(tmp_path / "records.db")), FakeClock()
    config = IdempotencyConfig(lock_grace_ms=1000)
    ran, other = [], []

    @idempotent_function(data_keyword_argument="order", store=store, config=config, clock=clock, key_prefix="p")
    def charge(order):
        ran.append(order["id"])
        if len(ran) == 1:  # the body takes 2 s; meanwhile the order is redelivered to another invocation
            clock.advance(2)
            thread = threading.Thread(target=redelivery)
            thread.start()
            thread.join()
        return "charged"

    def redelivery():
        with register_lambda_context(FakeContext(remaining_ms=60_000, aws_request_id="r-3")):
            try:
                other.append(charge(order={"id": 7}))
            except IdempotencyAlreadyInProgressError as e:
                other.append(type(e).__name__)

    def warm_container():
        finished = FakeContext(remaining_ms=0, aws_request_id="r-1")  # invocation 1, over: no time left
        middleware, handler = register_lambda_context(finished), register_lambda_context(finished)
        middleware.close()
        handler.close()
        assert current_lambda_context() is None  # both closed: no invocation runs in this thread
        # Invocation 2, 60 s left, registered as Powertools documents it.
        config.register_lambda_context(FakeContext(remaining_ms=60_000, aws_request_id="r-2"))
        assert charge(order={"id": 7}) == "charged"

    contextvars.copy_context().run(warm_container)
    assert other == ["IdempotencyAlreadyInProgressError"]  # its lock held: the redelivery is retried later
    assert ran == [7]  # the body ran once


def test_a_thread_started_with_a_copy_of_the_context_no_longer_sees_an_invocation_once_it_closed():
    """Ending: committed after its body ran once. The same leftover, seen by a thread a body starts with a copy
    of its contextvars (as the docs advise) that outlives the invocation: its guards took the finished invocation's
    deadline, the grace only, on a warm container's next invocation."""
    finished = FakeContext(remaining_ms=0, aws_request_id="r-1")
    closed, seen = threading.Event(), []

    def background():
        closed.wait(timeout=10)  # until the invocation below has closed
        seen.append(current_lambda_context())

    with register_lambda_context(finished):
        thread = threading.Thread(target=contextvars.copy_context().run, args=(background,))
        thread.start()
    closed.set()
    thread.join()
    assert seen == [None]


# -- the stream records made on first use: `from consumer.sources import *` no longer gave them --------------------


def test_an_invocation_closed_by_another_thread_leaves_the_one_open_around_it_current():
    # The handler's thread opened an outer invocation and one inside it; a thread of its own closes the inner one
    # while another invocation runs in the process (a local server): the handler's thread sees its outer context
    # again, not none (two invocations running make a bare fallback ambiguous).
    outer_context = FakeContext(aws_request_id="outer")
    other_opened, other_may_close, closed = threading.Event(), threading.Event(), threading.Event()

    def other_invocation():
        with register_lambda_context(FakeContext(aws_request_id="other")):
            other_opened.set()
            other_may_close.wait(10)

    other = threading.Thread(target=other_invocation)
    other.start()
    try:
        assert other_opened.wait(10)
        with register_lambda_context(outer_context):
            inner = register_lambda_context(FakeContext(aws_request_id="inner"))
            closer = threading.Thread(target=lambda: (inner.close(), closed.set()))
            closer.start()
            closer.join(10)
            assert closed.is_set()
            assert current_lambda_context() is outer_context
    finally:
        other_may_close.set()
        other.join(10)


def test_a_star_import_of_the_sources_still_gives_the_stream_records():
    """No ending at stake: the API. ``KinesisRecord`` and ``DynamoDBStreamRecord`` became names made on first use
    (PEP 562); ``consumer.sources`` had no ``__all__``, so a star import took its globals, which no longer held them
    (a NameError in the user's handler module). Run in a fresh interpreter: once used, a name is a global."""
    code = (
        "from consumer.sources import *\n"
        "print(KinesisRecord.__name__, DynamoDBStreamRecord.__name__, SQSRecord.__name__, EventType.KINESIS.value)"
    )
    here = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}  # this tree's consumer
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=here)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["KinesisRecord", "DynamoDBStreamRecord", "SQSRecord", "kinesis"]


# -- the event type read once by identity: a processor given its value as a string ran a FIFO queue as a standard one


def _fifo_message(message_id, group):
    return {
        "messageId": message_id,
        "body": message_id,
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders.fifo",
        "attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": group},
    }


@pytest.mark.parametrize("event_type", [EventType.SQS, "sqs"], ids=["member", "its-value"])
def test_a_processor_given_the_event_types_value_runs_a_fifo_queue_as_fifo(event_type):
    """Ending: reported in batchItemFailures. ``BatchProcessor("sqs")`` raised an AttributeError with every batch
    before; once the event type was compared by identity with members read once, the string passed the SQS check
    but not the FIFO one: on a FIFO queue the records after a failure ran (m3, another group), where the FIFO
    processor stops at the first failure and reports the rest, as ``EventType.SQS`` does."""
    ran = []

    def handle(record):
        ran.append(record.message_id)
        if record.message_id == "m1":
            raise ValueError("declined")

    processor = BatchProcessor(event_type, store=InMemoryPersistenceLayer(), raise_on_entire_batch_failure=False)
    event = {"Records": [_fifo_message("m1", "g1"), _fifo_message("m2", "g1"), _fifo_message("m3", "g2")]}
    response = process_partial_response(event, handle, processor)
    assert response == {"batchItemFailures": [{"itemIdentifier": m} for m in ("m1", "m2", "m3")]}
    assert ran == ["m1"]
    assert processor.summary.event_type == "sqs_fifo"


def test_a_processor_given_an_unknown_event_type_is_refused_when_made():
    """Ending: raised. Powertools' own ``EventType.SQS`` (value ``"SQS"``), kept by a migrating user, failed every
    batch as a DynamoDB Streams one; it is refused when the processor is made, naming ours."""

    class PowertoolsEventType(enum.Enum):  # aws_lambda_powertools.utilities.batch.EventType's shape
        SQS = "SQS"

    for given in ("SQS", PowertoolsEventType.SQS):
        with pytest.raises(ValueError, match=r"is not an EventType of idempotent-consumer: pass consumer\.EventType"):
            BatchProcessor(given, store=InMemoryPersistenceLayer())
