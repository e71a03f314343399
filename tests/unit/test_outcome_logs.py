"""What operators read: one structured log record per record that did not plainly succeed, and the summary.

Each is checked as the Lambda runtime writes it in its text format and under ``AWS_LAMBDA_LOG_FORMAT=JSON``
(``tests/lambda_log_format.py``), and through Powertools Logger (in the benchmark's environment, where it is
installed). Every record's body carries a secret that must never reach any of them.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from events import sqs_event, sqs_record
from fakes import FakeClock, FakeContext
from lambda_log_format import LambdaJsonFormatter, RequestIdFilter, lambda_text_formatter
from outcome_batches import EXPECTED, FUNCTION_NAME, PLAIN_SUCCESS, REQUEST_ID, SECRET, run_every_outcome

from consumer import (
    BatchProcessingError,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    IdempotencyKeyError,
    process_partial_response,
)
from persistence import InMemoryPersistenceLayer

ROOT = Path(__file__).resolve().parents[2]
BENCH_PYTHON = ROOT / "bench" / ".venv" / "bin" / "python"
LOGGER = logging.getLogger("idempotent_consumer")
FIELDS = ("outcome", "idempotency_key", "item_identifier", "event_source", "lambda_request_id", "exception_type")
WITH_TRACEBACK = {"failed", "lock_lost"}


class Captured:
    """The library's log records as objects, as Lambda's text format writes them, and as its JSON format does."""

    def __init__(self) -> None:
        self.records: list[logging.LogRecord] = []
        self.plain, self.json = io.StringIO(), io.StringIO()
        keep = logging.Handler()
        keep.emit = self.records.append  # type: ignore[method-assign]
        self.handlers = [keep]
        # JSON first: the text formatter leaves attributes on the record (asctime) Lambda's one formatter never sees.
        for stream, formatter in ((self.json, LambdaJsonFormatter()), (self.plain, lambda_text_formatter())):
            handler = logging.StreamHandler(stream)
            handler.setFormatter(formatter)
            handler.addFilter(RequestIdFilter(REQUEST_ID))
            self.handlers.append(handler)

    def outcome_records(self) -> dict[str, list[logging.LogRecord]]:
        by_item: dict[str, list[logging.LogRecord]] = {}
        for record in self.records:
            if hasattr(record, "outcome"):
                by_item.setdefault(record.item_identifier, []).append(record)
        return by_item

    def json_documents(self) -> list[dict]:
        return [json.loads(line) for line in self.json.getvalue().splitlines()]


@pytest.fixture
def captured() -> Iterator[Captured]:
    capture, level = Captured(), LOGGER.level
    LOGGER.setLevel(logging.DEBUG)
    for handler in capture.handlers:
        LOGGER.addHandler(handler)
    try:
        yield capture
    finally:
        for handler in capture.handlers:
            LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)


@pytest.fixture(scope="module")
def every_outcome():
    """Run the batches once with capture on: (what they returned, what was logged)."""
    capture, level = Captured(), LOGGER.level
    LOGGER.setLevel(logging.DEBUG)
    for handler in capture.handlers:
        LOGGER.addHandler(handler)
    try:
        run = run_every_outcome()
    finally:
        for handler in capture.handlers:
            LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)
    return run, capture


def item_id(run, name):
    """The identifier ``batchItemFailures`` uses for the record the tests call ``name``."""
    return run.items[name].item_id


def test_each_outcome_that_is_not_plain_success_is_one_log_record_with_its_fields(every_outcome):
    run, capture = every_outcome
    by_item = capture.outcome_records()
    assert set(by_item) == {item_id(run, name) for name in EXPECTED}  # plain successes log nothing of their own
    not_stored = {"m-unstorable": "ResultEncodingError", "m-huge": "ItemTooLargeError"}  # why the result was not
    for name, outcome in EXPECTED.items():
        item = run.items[name]
        (record,) = by_item[item.item_id]  # exactly one
        assert {field: getattr(record, field) for field in FIELDS} == {
            "outcome": outcome,
            "idempotency_key": item.key,
            "item_identifier": item.item_id,
            "event_source": "kinesis" if name.startswith("k-") else "sqs",
            "lambda_request_id": REQUEST_ID,
            "exception_type": not_stored.get(name) or (None if item.error is None else type(item.error).__name__),
        }, name
        assert record.levelno == (logging.ERROR if outcome == "failed" else logging.WARNING), name
        if outcome in WITH_TRACEBACK:
            assert record.exc_info[1] is item.error, name
        else:
            assert not record.exc_info, name
    # The keys are there wherever the record reached its guard.
    assert all(run.items[name].key for name in ("m-fail", "m-unstorable", "m-busy", "m-late", "k-1"))
    assert all(run.items[name].key is None for name in ("m-nokey", "m-deferred", "k-2"))
    assert all(item_id(run, name) not in by_item for name in PLAIN_SUCCESS)


def test_the_summary_is_logged_as_fields_at_warning_when_a_record_failed(every_outcome):
    _, capture = every_outcome
    summaries = [r for r in capture.records if hasattr(r, "batch_summary")]
    assert [(r.levelno, r.event_source, r.lambda_request_id) for r in summaries] == [
        (logging.WARNING, "sqs", REQUEST_ID),
        (logging.WARNING, "kinesis", REQUEST_ID),
    ]
    sqs = summaries[0].batch_summary
    assert {k: sqs[k] for k in ("records", "processed", "replayed", "unguarded", "failed", "lock_lost")} == {
        "records": 10,
        "processed": 3,
        "replayed": 1,
        "unguarded": 1,
        "failed": 3,
        "lock_lost": 1,
    }
    assert (sqs["in_progress"], sqs["deferred"], sqs["skipped"]) == (1, 1, 0)
    assert (
        summaries[0]
        .getMessage()
        .startswith(
            "batch processed: 10 sqs records: 3 processed, 1 replayed, 1 unguarded, 3 failed, 1 lock lost, "
            "1 in progress, 1 deferred ("
        )
    )


def test_the_summary_is_logged_at_info_when_every_record_succeeded(captured):
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    event = sqs_event(sqs_record("m-1", 1), sqs_record("m-1", 1))
    process_partial_response(event, lambda record: "ok", processor, FakeContext(aws_request_id="r-ok"))
    (record,) = captured.records  # no record of its own for a success or a replay
    assert (record.levelno, record.lambda_request_id) == (logging.INFO, "r-ok")
    assert record.getMessage().startswith("batch processed: 2 sqs records: 1 processed, 1 replayed (")
    assert record.batch_summary["processed"] == record.batch_summary["replayed"] == 1


def test_in_lambdas_text_format_each_line_says_the_essentials(every_outcome):
    run, capture = every_outcome
    events = [e for e in capture.plain.getvalue().split("\n[") if e]
    first_lines = [e.split("\n")[0].lstrip("[") for e in events]
    assert len(first_lines) == len(EXPECTED) + 2  # one per record, one summary per batch
    for line in first_lines:
        level, _, request_id, _ = line.split("\t")
        assert request_id == REQUEST_ID
        assert level.strip("[]") in {"ERROR", "WARNING"}
    lines = {message.split("\t")[-1] for message in first_lines}
    fail = run.items["m-fail"]
    assert f"record m-fail failed: ValueError: declined by the bank (key {fail.key}); reported for redelivery" in lines
    assert (
        "record m-deferred deferred: less than 1000 ms were left before the Lambda deadline; reported for redelivery"
        in lines
    )
    assert any(
        line.startswith("record m-busy is in progress ('local#") and "is being processed by" in line for line in lines
    )
    assert any(line.startswith("record m-late lost its lock to another invocation") for line in lines)
    assert (
        "record m-nokey ran unguarded: no idempotency key: 'powertools_json(body).order_id' selected nothing on SQS "
        "message m-nokey; a redelivery runs it again" in lines
    )
    assert any(line.endswith("committed without it (record m-unstorable)") for line in lines)
    assert (
        f"record {item_id(run, 'k-2')} skipped: an earlier record it must not overtake failed; reported for redelivery"
        in lines
    )
    # A failure's traceback follows its line, ending with the exception.
    (fail_event,) = [e for e in events if "record m-fail failed" in e.split("\n")[0]]
    assert fail_event.split("\n")[1] == "Traceback (most recent call last):"
    assert fail_event.rstrip().endswith("ValueError: declined by the bank")


def test_under_lambdas_json_format_every_field_is_a_top_level_member(every_outcome):
    run, capture = every_outcome
    documents = capture.json_documents()
    by_item = {d["item_identifier"]: d for d in documents if "outcome" in d}
    assert len(by_item) == len(EXPECTED)
    fail = by_item["m-fail"]
    assert fail["level"] == "ERROR"
    assert fail["requestId"] == fail["lambda_request_id"] == REQUEST_ID
    assert (fail["outcome"], fail["idempotency_key"], fail["event_source"]) == (
        "failed",
        run.items["m-fail"].key,
        "sqs",
    )
    assert fail["errorType"] == fail["exception_type"] == "ValueError"
    assert fail["errorMessage"] == "declined by the bank"
    assert isinstance(fail["stackTrace"], list)
    assert any("outcome_batches.py" in frame for frame in fail["stackTrace"])
    assert fail["message"].startswith("record m-fail failed: ValueError: declined by the bank (key ")
    assert "stackTrace" not in by_item["m-busy"]  # an expected condition, not a failure: no traceback
    assert by_item["m-busy"]["exception_type"] == "IdempotencyAlreadyInProgressError"
    assert by_item["m-late"]["errorType"] == "LockLostError"
    assert "idempotency_key" not in by_item["m-deferred"]  # None is left out
    assert all("asctime" not in d for d in documents)  # only what the runtime's formatter writes
    # The summary is a JSON object of its own, not a JSON string inside the message.
    summaries = [d for d in documents if "batch_summary" in d]
    assert [s["level"] for s in summaries] == ["WARNING", "WARNING"]
    assert summaries[0]["batch_summary"]["failed"] == 3
    assert summaries[0]["event_source"] == "sqs"
    assert summaries[0]["message"].startswith("batch processed: 10 sqs records:")


def test_through_powertools_logger_every_field_is_a_top_level_member():
    assert BENCH_PYTHON.exists(), "the benchmark environment is missing: run `make install`"
    script = (
        "from aws_lambda_powertools import Logger\n"
        "from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers\n"
        "import consumer  # registers the library's logger\n"
        "from outcome_batches import run_every_outcome\n"
        "logger = Logger(service='orders')\n"
        "copy_config_to_registered_loggers(source_logger=logger, include={'idempotent_consumer'})\n"
        "run_every_outcome()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    result = subprocess.run([str(BENCH_PYTHON), "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    documents = [json.loads(line) for line in result.stdout.splitlines()]
    by_item = {d["item_identifier"]: d for d in documents if "outcome" in d}
    assert {d: by_item[d]["outcome"] for d in ("m-fail", "m-late", "m-busy", "m-deferred")} == {
        "m-fail": "failed",
        "m-late": "lock_lost",
        "m-busy": "in_progress",
        "m-deferred": "deferred",
    }
    fail = by_item["m-fail"]
    assert (fail["level"], fail["service"], fail["lambda_request_id"]) == ("ERROR", "orders", REQUEST_ID)
    assert fail["exception_type"] == fail["exception_name"] == "ValueError"
    assert fail["exception"].startswith("Traceback (most recent call last):")
    assert fail["idempotency_key"].startswith("local#")
    summaries = [d for d in documents if "batch_summary" in d]
    assert [s["batch_summary"]["records"] for s in summaries] == [10, 2]
    assert SECRET not in result.stdout + result.stderr


def test_no_payload_ever_reaches_a_log_line_or_a_metrics_document(captured, capsys, caplog):
    with caplog.at_level(logging.DEBUG):
        run = run_every_outcome(metrics=True)
    assert run.items["m-fail"].outcome is not None
    out, err = capsys.readouterr()
    assert out.count('"_aws"') == 2  # one metrics document per batch
    written = [captured.plain.getvalue(), captured.json.getvalue(), out, err, caplog.text]
    written += [repr(r.__dict__) for r in captured.records]
    assert all(SECRET not in text for text in written)
    assert all(SECRET[:12] not in text for text in written)  # not even a piece of it


def test_a_log_handler_or_filter_that_raises_changes_no_outcome(capsys):
    expected = run_every_outcome()

    class Refusing(logging.Handler):
        def emit(self, record):  # noqa: ARG002 - refuses every record
            raise RuntimeError("the log sink is down")

    class BadFormatter(logging.Formatter):
        def format(self, record):  # noqa: ARG002 - fails on every record
            raise RuntimeError("cannot format")

    class Raising(logging.Filter):
        def filter(self, record):  # noqa: ARG002 - fails on every record
            raise OSError("a filter that fails")

    broken = logging.StreamHandler(io.StringIO())
    broken.setFormatter(BadFormatter())
    refusing, raising = Refusing(), Raising()
    LOGGER.addHandler(refusing)
    LOGGER.addHandler(broken)
    try:
        with_refusing_handler = run_every_outcome(metrics=True)
        LOGGER.addFilter(raising)
        with_raising_filter = run_every_outcome(metrics=True)
    finally:
        LOGGER.removeFilter(raising)
        LOGGER.removeHandler(refusing)
        LOGGER.removeHandler(broken)
    for run in (with_refusing_handler, with_raising_filter):
        assert run.responses == expected.responses
        assert {n: (i.outcome, i.key) for n, i in run.items.items()} == {
            n: (i.outcome, i.key) for n, i in expected.items.items()
        }
    err = capsys.readouterr().err
    assert "idempotent-consumer: could not write 'record m-fail failed: ValueError" in err
    assert "OSError('a filter that fails')" in err


def test_a_failed_release_in_a_batch_is_named_on_the_records_own_line(captured):
    class ReleaseFails(InMemoryPersistenceLayer):
        def release(self, record):  # noqa: ARG002 - the store is unreachable
            raise ConnectionError("store unreachable")

    processor = BatchProcessor(EventType.SQS, store=ReleaseFails(), raise_on_entire_batch_failure=False)

    def declined(record):
        raise ValueError("declined")

    process_partial_response(sqs_event(sqs_record("m-1", 1)), declined, processor)
    (record,) = [r for r in captured.records if hasattr(r, "outcome")]  # the guard does not log it a second time
    assert record.outcome == "failed"
    assert "; releasing its lock failed too: PersistenceLayerError: the store failed to release" in record.getMessage()
    assert processor.items[0].release_error is not None


def test_a_guard_on_its_own_logs_its_warnings_with_the_fields_it_knows(captured):
    store, context = InMemoryPersistenceLayer(), FakeContext(aws_request_id="r-guard")
    with IdempotencyGuard({"messageId": "m-1"}, store=store, context=context) as guard:
        guard.result = object()
    config = IdempotencyConfig(event_key_jmespath="missing", raise_on_no_idempotency_key=False)
    with IdempotencyGuard({"messageId": "m-2"}, store=store, config=config, context=context):
        pass
    unstorable, unguarded = captured.records
    assert (unstorable.outcome, unstorable.idempotency_key, unstorable.item_identifier) == (
        "committed_without_response",
        guard.key,
        None,
    )
    assert (unstorable.lambda_request_id, unstorable.exception_type) == ("r-guard", "ResultEncodingError")
    assert (unguarded.outcome, unguarded.idempotency_key, unguarded.lambda_request_id) == ("unguarded", None, "r-guard")


def test_a_guard_on_its_own_logs_a_failed_release_with_its_invocations_request_id(captured):
    class ReleaseFails(InMemoryPersistenceLayer):
        def release(self, record):  # noqa: ARG002 - the store is unreachable
            raise ConnectionError("store unreachable")

    guard = IdempotencyGuard({"messageId": "m-1"}, store=ReleaseFails(), context=FakeContext(aws_request_id="r-guard"))
    with pytest.raises(ValueError, match="declined"), guard:
        raise ValueError("declined")
    (record,) = captured.records
    assert (record.outcome, record.idempotency_key, record.exception_type) == (
        "failed",
        guard.key,
        "PersistenceLayerError",
    )
    assert record.lambda_request_id == "r-guard"


def test_the_async_processor_logs_the_same_records(captured, face):
    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), clock=FakeClock())

    def handler(record):
        if record.message_id == "m-2":
            raise ValueError("declined")
        return "ok"

    context = FakeContext(aws_request_id="r-face", function_name=FUNCTION_NAME)
    face.process(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), handler, processor, context)
    (record,) = [r for r in captured.records if hasattr(r, "outcome")]
    assert (record.outcome, record.item_identifier, record.lambda_request_id) == ("failed", "m-2", "r-face")
    assert record.exc_info[0] is ValueError
    assert record.idempotency_key == processor.items[1].key is not None


def test_under_idempotency_disabled_records_running_unguarded_are_not_logged_one_by_one(captured, monkeypatch):
    monkeypatch.setenv("IDEMPOTENCY_DISABLED", "1")  # users' unit tests: every record runs unguarded, by request
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    process_partial_response(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), lambda record: "ok", processor)
    # Besides the summary, only the once-per-process warning that IDEMPOTENCY_DISABLED is set (if no earlier test
    # set it off): no line per record.
    assert not [r for r in captured.records if hasattr(r, "outcome")]
    (summary,) = [r for r in captured.records if hasattr(r, "batch_summary")]
    assert summary.batch_summary["unguarded"] == 2
    assert summary.levelno == logging.INFO


def test_an_exception_that_cannot_be_printed_is_still_logged_and_its_record_reported(captured):
    class UnprintableError(Exception):
        def __str__(self):
            raise RuntimeError("no text")

    def handler(record):
        raise UnprintableError

    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), raise_on_entire_batch_failure=False)
    response = process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    (record,) = [r for r in captured.records if hasattr(r, "outcome")]
    assert record.getMessage().startswith(
        "record m-1 failed: UnprintableError: <UnprintableError that cannot be printed> (key "
    )
    assert record.exception_type == "UnprintableError"


def test_an_entire_batch_failure_is_logged_measured_and_hooked_before_it_is_raised(captured, capsys):
    seen = []
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), metrics=True, on_outcome=seen.append)

    def declined(record):
        raise ValueError("declined")

    with pytest.raises(BatchProcessingError):
        process_partial_response(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), declined, processor)
    assert [r.item_identifier for r in captured.records if hasattr(r, "outcome")] == ["m-1", "m-2"]
    assert [r.batch_summary["failed"] for r in captured.records if hasattr(r, "batch_summary")] == [2]
    assert json.loads(capsys.readouterr().out)["Failed"] == 2
    assert [i.item_id for i in seen] == ["m-1", "m-2"]


@pytest.mark.parametrize(
    "expression",
    ["powertools_json(dynamodb.NewImage)", "base64_decode(dynamodb.NewImage)", "length(dynamodb.NewImage.card.S)"],
)
def test_a_key_expression_given_the_wrong_type_names_the_types_never_the_value(captured, expression):
    # JMESPath's type errors quote the value they were given: here a card number from the record's image.
    card = "4111111111111111"
    image = {"id": {"S": "1"}, "card": {"S": card}}
    if expression.startswith("length"):
        image["card"] = {"S": int(card)}  # length() of a number
    record = {
        "eventID": "e-1",
        "eventName": "INSERT",
        "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/x",
        "dynamodb": {"Keys": {"id": {"S": "1"}}, "NewImage": image, "SequenceNumber": "1"},
    }
    config = IdempotencyConfig(event_key_jmespath=expression)
    processor = BatchProcessor(
        EventType.DYNAMODB_STREAMS,
        store=InMemoryPersistenceLayer(),
        config=config,
        raise_on_entire_batch_failure=False,
    )
    response = process_partial_response({"Records": [record]}, lambda r: "ran", processor)
    assert response == {"batchItemFailures": [{"itemIdentifier": "1"}]}  # reported, not run, not lost
    error = processor.items[0].error
    assert isinstance(error, IdempotencyKeyError)
    assert "takes" in str(error)
    assert error.__cause__ is None
    assert error.__suppress_context__
    written = [captured.plain.getvalue(), captured.json.getvalue(), *(repr(r.__dict__) for r in captured.records)]
    assert "IdempotencyKeyError" in captured.plain.getvalue()
    assert all(card not in text for text in written)


def test_a_batch_a_base_exception_stops_still_reports_what_it_decided(captured, capsys, face):
    # m-1 fails, m-2 is interrupted by Ctrl-C (or the runtime's SystemExit), m-3 never starts: the invocation fails
    # and the whole batch comes back, but m-1's failure, the counts and the metrics must not vanish with it.
    seen = []

    def handler(record):
        if record.message_id == "m-1":
            raise ValueError("card declined")
        if record.message_id == "m-2":
            raise KeyboardInterrupt
        return "ok"

    processor = face.processor(EventType.SQS, store=InMemoryPersistenceLayer(), metrics=True, on_outcome=seen.append)
    event = sqs_event(sqs_record("m-0", 0), sqs_record("m-1", 1), sqs_record("m-2", 2), sqs_record("m-3", 3))
    with pytest.raises(KeyboardInterrupt):
        face.process(event, handler, processor, None)
    by_item = captured.outcome_records()
    assert set(by_item) == {"m-1"}  # the decided failure; the undecided records are in the summary
    (failed,) = by_item["m-1"]
    assert (failed.outcome, failed.levelno, failed.exception_type) == ("failed", logging.ERROR, "ValueError")
    assert failed.exc_info[0] is ValueError
    (summary,) = [r for r in captured.records if hasattr(r, "batch_summary")]
    assert summary.levelno == logging.ERROR
    # asyncio lets a KeyboardInterrupt out of the loop at once and cancels the batch's task: the line names the
    # KeyboardInterrupt, which is what leaves asyncio.run, not the cancellation it caused
    stopped_by = KeyboardInterrupt
    assert summary.exception_type == stopped_by.__name__
    assert summary.exc_info[0] is stopped_by
    assert f"interrupted by {stopped_by.__name__} with 2 of 4 records undecided" in summary.getMessage()
    counts = summary.batch_summary
    assert (counts["records"], counts["processed"], counts["failed"]) == (4, 1, 1)
    assert processor.summary is not None
    assert processor.summary.failed == 1
    (document,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    # m-2 and m-3 come back with the whole batch, as failed records do: the metrics count them failed
    assert (document["Records"], document["Processed"], document["Failed"]) == (4, 1, 3)
    assert [(i.item_id, i.outcome.value) for i in seen] == [("m-0", "processed"), ("m-1", "failed")]


def test_a_processor_without_a_store_says_so_once_not_once_per_record(captured, face):
    # Powertools' pattern: no store, a plain handler: every record runs without idempotency, as the user chose.
    processor = face.processor(EventType.SQS)
    for _ in range(2):
        face.process(sqs_event(sqs_record("m-1", 1), sqs_record("m-2", 2)), lambda record: "ok", processor, None)
    assert not captured.outcome_records()  # no "no idempotency key selected" line per record
    warnings = [r for r in captured.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "has no store" in warnings[0].getMessage()
    summaries = [r.batch_summary for r in captured.records if hasattr(r, "batch_summary")]
    assert [s["unguarded"] for s in summaries] == [2, 2]  # still counted
