"""Text a producer wrote stays on its one line: in a log message and in every line the CLI prints.

An exception's text may quote a producer's field; the ``key`` command prints what a record selects; the ``records``
commands print what a store holds. A line break there would forge a line (a ``[INFO] ... batch processed`` of its
own), a control character would reach the terminal, a bidirectional override would reorder what is shown.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from events import sqs_event, sqs_record
from fakes import FakeContext
from lambda_log_format import LambdaJsonFormatter, RequestIdFilter, lambda_text_formatter

from consumer import BatchProcessor, EventType, process_partial_response
from consumer._reports import one_line
from consumer.cli import main
from persistence import InMemoryPersistenceLayer

REQUEST_ID = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
FORGED = "[INFO]\t2026-01-01T00:00:00.000Z\tforged\tbatch processed: 2 sqs records: 2 processed (0.1 ms)"
# A line break of each kind, a tab, ANSI colour, DEL, C1 controls (NEL among them), and bidi controls of each kind.
HOSTILE = f"o-7\n{FORGED}\r\n\x1b[31mred\x1b[0m\x7f\x85\x9b\u2028\u2029\u202etxt.exe\u2066\u2069\u200e\u200f\u061c"
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def test_each_line_break_control_and_bidi_control_is_escaped_so_json_reads_it_back():
    escaped = one_line(HOSTILE)
    assert not UNSAFE.search(escaped)
    assert escaped.startswith("o-7\\u000a[INFO]\\u0009")
    assert "\\u202etxt.exe" in escaped
    assert json.loads(f'"{escaped}"') == HOSTILE  # an escape in a JSON string is the character itself
    assert one_line(escaped) == escaped
    assert one_line("café 東京 🎉 \\n") == "café 東京 🎉 \\n"  # text, and a backslash already written, stay


@pytest.fixture
def written() -> Iterator[tuple[io.StringIO, io.StringIO, list[logging.LogRecord]]]:
    """The library's log records as Lambda's text format and its JSON format write them, and as objects."""
    logger, level = logging.getLogger("idempotent_consumer"), logging.getLogger("idempotent_consumer").level
    text, documents, records = io.StringIO(), io.StringIO(), []
    handlers = []
    for stream, formatter in ((documents, LambdaJsonFormatter()), (text, lambda_text_formatter())):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        handler.addFilter(RequestIdFilter(REQUEST_ID))
        handlers.append(handler)
    keep = logging.Handler()
    keep.emit = records.append  # type: ignore[method-assign]
    handlers.append(keep)
    logger.setLevel(logging.INFO)
    for handler in handlers:
        logger.addHandler(handler)
    try:
        yield text, documents, records
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_failed_records_message_quoting_a_producers_field_is_one_line_and_its_traceback_keeps_the_text(written):
    text, documents, records = written

    def handler(record):
        order = record.json_body["order"]
        if order != "o-1":
            raise ValueError(f"order {order} rejected")
        return order

    event = sqs_event(sqs_record("m-1", {"order": "o-1"}), sqs_record("m-2", {"order": HOSTILE}))
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    process_partial_response(event, handler, processor, FakeContext(aws_request_id=REQUEST_ID))
    failed, summary = records
    assert not UNSAFE.search(failed.getMessage())
    assert not UNSAFE.search(summary.getMessage())
    message, traceback_and_summary = text.getvalue().split("\nTraceback (most recent call last):\n")
    assert message.count("\n") == 0  # the failed record's message: one line, to its end
    assert message.startswith("[ERROR]\t")
    assert message.endswith("reported for redelivery")
    assert f"record m-2 failed: ValueError: order {one_line(HOSTILE)} rejected (key " in message
    assert f"ValueError: order {HOSTILE} rejected\n" in traceback_and_summary  # the traceback is the exception's own
    assert traceback_and_summary.splitlines()[-1].startswith("[WARNING]\t")  # then the summary, on a line of its own
    assert "batch processed: 2 sqs records: 1 processed, 1 failed" in traceback_and_summary.splitlines()[-1]
    first, _ = (json.loads(line) for line in documents.getvalue().rstrip("\n").split("\n"))
    assert first["message"] == failed.getMessage()
    assert first["errorMessage"] == f"order {HOSTILE} rejected"


def test_the_key_command_prints_a_producers_selection_escaped_one_line_per_record(tmp_path, capsys):
    event = sqs_event(sqs_record("m-1", {"order_id": HOSTILE}), sqs_record("m-2", {"order_id": "o-2"}))
    (tmp_path / "event.json").write_text(json.dumps(event))
    assert main(["key", "--event", str(tmp_path / "event.json"), "--jmespath", "powertools_json(body).order_id"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4  # selected, key; selected, key
    assert lines[0] == f"record 0: selected {one_line(json.dumps(HOSTILE, ensure_ascii=False))}"
    assert json.loads(lines[0].removeprefix("record 0: selected ")) == HOSTILE
    assert not any(UNSAFE.search(line) for line in lines)
