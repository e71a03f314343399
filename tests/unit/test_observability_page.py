"""The log lines and EMF document docs/observability.md shows are what the code writes: this test checks it.

One SQS batch (one record charged, one refused) runs in a Lambda-like setting: a handler file at
``/var/task/app.py``, a context with its request id and function name, the processor's clock and duration fixed.
Its log records are formatted as the Lambda runtime writes them (``tests/lambda_log_format.py``) and its EMF
document is taken from stdout. Two things are left out of what the page shows, and said so there: the
library's own stack frames and the JSON ``location`` (both name this checkout's paths and line numbers).
"""

from __future__ import annotations

import io
import json
import logging
import re
import types
from pathlib import Path

import pytest
from emf import validate_line
from events import sqs_event
from lambda_log_format import LambdaJsonFormatter, RequestIdFilter, lambda_text_formatter

from consumer import BatchProcessor, EventType, process_partial_response
from persistence import InMemoryPersistenceLayer

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "observability.md"
REQUEST_ID = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
APP = """
def record_handler(record):
    order = record.json_body
    if order["amount"] <= 0:
        raise ValueError(f"order {order['id']}: amount must be positive")
    return {"charged": order["amount"]}
"""
EVENT = sqs_event(
    {"messageId": "4f1d2a3b-0001", "body": '{"id": "o-1", "amount": 30}'},
    {"messageId": "4f1d2a3b-0002", "body": '{"id": "o-2", "amount": -5}'},
)


class Context:
    aws_request_id = REQUEST_ID
    function_name = "orders"

    def get_remaining_time_in_millis(self):
        return 30_000


class FixedTime(logging.Filter):
    def filter(self, record):
        record.created, record.msecs = NOW + 0.042, 42.0
        return True


HANDLER_FILE = "/var/task/app.py"


def _without_library_frames(text):
    """A traceback with only the handler file's frames (each a ``File`` line and its source line): not the
    library's, nor any other code the call went through (under ``make mutation``, mutmut's trampolines)."""
    lines, kept, skipping = text.split("\n"), [], False
    for line in lines:
        if line.startswith('  File "'):
            skipping = not line.startswith(f'  File "{HANDLER_FILE}"')
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


@pytest.fixture(scope="module")
def written():
    """What the batch writes: (Lambda text lines, Lambda JSON documents, the EMF document)."""
    namespace: dict = {}
    exec(compile(APP, HANDLER_FILE, "exec"), namespace)  # noqa: S102 - a handler file as Lambda has it
    plain, documents = io.StringIO(), io.StringIO()
    logger, handlers = logging.getLogger("idempotent_consumer"), []
    # JSON first: the text formatter leaves attributes on the record (asctime) that Lambda's one formatter never sees.
    for stream, formatter in ((documents, LambdaJsonFormatter()), (plain, lambda_text_formatter())):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        handler.addFilter(RequestIdFilter(REQUEST_ID))
        handler.addFilter(FixedTime())
        handlers.append(handler)
        logger.addHandler(handler)
    ticks = iter([100.0, 100.0042])
    patch = pytest.MonkeyPatch()
    clock = types.SimpleNamespace(perf_counter=lambda: next(ticks))  # read when the batch starts and ends
    patch.setattr("consumer.batch._processor.time", clock)
    patch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders")
    stdout = io.StringIO()
    patch.setattr("sys.stdout", stdout)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), clock=lambda: NOW, metrics=True)
        response = process_partial_response(EVENT, namespace["record_handler"], processor, Context())
    finally:
        logger.setLevel(level)
        patch.undo()
        for handler in handlers:
            logger.removeHandler(handler)
    assert response == {"batchItemFailures": [{"itemIdentifier": "4f1d2a3b-0002"}]}
    json_lines = []
    for line in documents.getvalue().splitlines():
        document = json.loads(line)
        document.pop("location", None)
        if "stackTrace" in document:
            document["stackTrace"] = [frame for frame in document["stackTrace"] if HANDLER_FILE in frame]
        json_lines.append(_indented(document))
    return (
        _without_library_frames(plain.getvalue()),
        "\n".join(json_lines) + "\n",
        _indented(validate_line(stdout.getvalue().strip())) + "\n",
    )


def _indented(document):
    """``json.dumps(indent=2)``, with each innermost object or array that fits in 100 characters on one line."""
    innermost = re.compile(r"([\[{])\n\s*([^\[\]{}]*?)\n\s*([\]}])")

    def one_line(match):
        line = match.group(1) + re.sub(r",\n\s*", ", ", match.group(2)) + match.group(3)
        return line if len(line) <= 100 else match.group(0)

    return innermost.sub(one_line, json.dumps(document, indent=2, ensure_ascii=False))


def test_the_page_shows_the_log_lines_lambdas_text_format_writes(written):
    plain, _, _ = written
    assert f"```text\n{plain}```" in PAGE.read_text()


def test_the_page_shows_the_log_documents_lambdas_json_format_writes(written):
    _, documents, _ = written
    assert f"```json\n{documents}```" in PAGE.read_text()


def test_the_page_shows_the_emf_document_the_processor_writes(written):
    _, _, emf = written
    assert f"```json\n{emf}```" in PAGE.read_text()


def test_the_page_shows_the_alarm_template_yaml_deploys():
    template = (ROOT / "template.yaml").read_text()
    start = template.index("  OrdersStuckRecordsAlarm:\n")
    alarm = template[start : template.index("\n  #", start) + 1]
    assert f"```yaml\n{alarm}```" in PAGE.read_text()


def test_the_page_names_every_event_source_value_a_log_record_carries():
    listed = re.search(r"`event_source` \(([^)]*)\)", PAGE.read_text()).group(1)
    assert {value.strip(" `") for value in listed.split(",")} == {source.value for source in EventType}
