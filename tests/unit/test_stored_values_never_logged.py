"""No stored response and no record payload reaches a log line, not even as the text of a chained exception.

A failed record is logged with its traceback, and a traceback prints every exception of the chain: an error of
ours whose own message is clean, but whose cause quotes the value it was given (a Pydantic ``input_value``, a
decoder's ``Invalid isoformat string: '...'``, JMESPath's type error), would print that value anyway. Each check
here formats the library's log records as Lambda writes them (text and JSON) and as Powertools Logger does.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import gzip
import io
import logging
import os
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest
from lambda_log_format import LambdaJsonFormatter, RequestIdFilter, lambda_text_formatter
from output_models import Checked

from consumer import (
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    IdempotencyKeyError,
    PowertoolsCutover,
    ResponseDecodeError,
    idempotent_function,
)
from consumer._output import encode_output
from consumer._serde import ResultEncodingError
from consumer.keys import make_key
from consumer.serialization import PydanticSerializer
from persistence import InMemoryPersistenceLayer, PersistenceLayerError
from persistence._base import decode_record

ROOT = Path(__file__).resolve().parents[2]
BENCH_PYTHON = ROOT / "bench" / ".venv" / "bin" / "python"
LOGGER = logging.getLogger("idempotent_consumer")
SECRET = "SECRET-4111111111111111"
TAGGED = '{"__ic__": "datetime", "v": "%s"}' % SECRET  # noqa: UP031 - JSON braces: a format string would need them doubled


@contextlib.contextmanager
def logged() -> Iterator[io.StringIO]:
    """What the library's logger writes meanwhile, in Lambda's text format and then its JSON format."""
    written, level = io.StringIO(), LOGGER.level
    handlers = []
    for formatter in (lambda_text_formatter(), LambdaJsonFormatter()):
        handler = logging.StreamHandler(written)
        handler.setFormatter(formatter)
        handler.addFilter(RequestIdFilter("req-1"))
        handlers.append(handler)
        LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG)
    try:
        yield written
    finally:
        for handler in handlers:
            LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)


def stored_with(response: str) -> tuple[InMemoryPersistenceLayer, dict[str, str]]:
    """A store holding record m-1 completed, its stored response replaced by ``response``."""
    store, record = InMemoryPersistenceLayer(), {"messageId": "m-1", "body": "{}"}
    with IdempotencyGuard(record, store=store) as guard:
        guard.result = "done"
    store._records[guard.key] = dataclasses.replace(store.get(guard.key), response=response)
    return store, record


class CardV1(pydantic.BaseModel):
    card: str


class CardV2(pydantic.BaseModel):  # the next deploy: the field changed type
    card: int


def test_a_stored_response_that_no_longer_fits_its_model_is_not_in_the_failed_records_traceback():
    store = InMemoryPersistenceLayer()

    @idempotent_function(data_keyword_argument="record", store=store, key_prefix="pay")
    def pay_v1(record: object) -> CardV1:
        return CardV1(card=SECRET)

    @idempotent_function(data_keyword_argument="record", store=store, key_prefix="pay")
    def pay_v2(record: object) -> CardV2:
        return CardV2(card=1)

    processor = BatchProcessor(EventType.SQS, raise_on_entire_batch_failure=False)
    event = {"Records": [{"messageId": "m-1", "body": "{}"}]}
    processor.process(event, pay_v1)
    with logged() as written:
        processor.process(event, pay_v2)  # the next deploy replays what pay_v1 stored
    error = processor.items[0].error
    assert isinstance(error, ResponseDecodeError)
    assert "card: Input should be a valid integer" in str(error)  # what did not fit, by place
    assert (error.__cause__, error.__context__) == (None, None)
    assert "Traceback" in written.getvalue()
    assert SECRET not in written.getvalue()


def test_a_stored_value_a_decoder_refuses_is_not_in_the_errors_traceback():
    store, record = stored_with(TAGGED)  # a datetime whose text a decoder quotes when it refuses it
    with pytest.raises(ResponseDecodeError, match=r"cannot be replayed \(ValueError\)") as failed:
        IdempotencyGuard(record, store=store).__enter__()
    assert SECRET not in "".join(traceback.format_exception(failed.value))


def test_through_powertools_logger_a_replay_that_fails_quotes_no_stored_value():
    assert BENCH_PYTHON.exists(), "the benchmark environment is missing: run `make install`"
    script = (
        "import dataclasses, sys\n"
        "from aws_lambda_powertools import Logger\n"
        "from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers\n"
        "from consumer import BatchProcessor, EventType, IdempotencyGuard\n"
        "from persistence import InMemoryPersistenceLayer\n"
        "logger = Logger(service='orders')\n"
        "copy_config_to_registered_loggers(source_logger=logger, include={'idempotent_consumer'})\n"
        "store, record = InMemoryPersistenceLayer(), {'messageId': 'm-1', 'body': '{}'}\n"
        "with IdempotencyGuard(record, store=store) as guard:\n"
        "    guard.result = 'done'\n"
        "store._records[guard.key] = dataclasses.replace(store.get(guard.key), response=sys.argv[1])\n"
        "processor = BatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)\n"
        "print(processor.process({'Records': [record]}, lambda record: 'ran'), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([str(BENCH_PYTHON), "-c", script, TAGGED], capture_output=True, text=True, env=env,
                            cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "{'batchItemFailures': [{'itemIdentifier': 'm-1'}]}" in result.stderr
    assert '"exception_name":"ResponseDecodeError"' in result.stdout.replace(" ", "")
    assert SECRET not in result.stdout


@pytest.mark.parametrize("card", [SECRET, "SECRET!"], ids=["would-not-replay", "cannot-be-dumped"])
def test_a_result_a_built_in_serializer_refuses_is_said_without_chaining_the_error_that_quotes_it(card):
    # Logged as committed without its response; a refusal of unrun work would log it with its traceback.
    with pytest.raises(ResultEncodingError) as refused:
        encode_output(Checked.model_construct(card=card), PydanticSerializer(Checked))
    assert refused.value.__cause__ is None
    assert card not in "".join(traceback.format_exception(refused.value))


@pytest.mark.parametrize(
    ("expression", "data", "quoted"),
    [
        ("base64_gzip_decode(body)", b"4111111111111111", "b'41'"),  # gzip: "Not a gzipped file (b'41')"
        ("powertools_base64(body)", b"\xe9t\xe9", "0xe9"),  # UTF-8: "can't decode byte 0xe9 in position 0"
        ("base64_gzip_decode(body)", gzip.compress(b"\xe9t\xe9", mtime=0), "0xe9"),
    ],
    ids=["not-gzip", "not-utf-8", "gzip-of-not-utf-8"],
)
def test_a_key_expression_whose_decoder_refuses_the_payload_quotes_none_of_it(expression, data, quoted):
    record = {"messageId": "m-1", "body": base64.b64encode(data).decode()}
    with pytest.raises(IdempotencyKeyError, match="event_key_jmespath") as refused:
        make_key(record, IdempotencyConfig(event_key_jmespath=expression))
    assert quoted not in "".join(traceback.format_exception(refused.value))


def test_a_stored_item_whose_response_is_not_text_is_refused_without_quoting_it():
    with pytest.raises(PersistenceLayerError, match="response is not text: a value of type bytes") as refused:
        decode_record(key="k", status="COMPLETE", expires_at=1, in_progress_expires_at=None, lease="l",
                      response=SECRET.encode(), payload_hash=None)  # fmt: skip
    assert SECRET not in "".join(traceback.format_exception(refused.value))


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("powertools_json(detail).order_id", "(powertools_json() takes string, got object)"),  # JMESPath's repr
        ("powertools_base64_gzip(detail.packed)", "(BadGzipFile)"),  # gzip's "Not a gzipped file (b'SE')"
    ],
)
def test_a_powertools_key_that_fails_on_a_record_is_logged_without_its_values(caplog, expression, said):
    cutover = PowertoolsCutover(
        table_name="PowertoolsIdempotency",
        until=dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc),
        function="app.handler",
        event_key_jmespath=expression,  # Powertools' expression, which fails on this record as it did there
    )
    detail = {"order_id": "o-1", "card": SECRET, "packed": base64.b64encode(SECRET.encode()).decode()}
    event = {"id": "e-1", "detail-type": "Paid", "source": "shop", "detail": detail}
    guard = IdempotencyGuard(
        event, store=InMemoryPersistenceLayer(), config=IdempotencyConfig(powertools_cutover=cutover)
    )
    with caplog.at_level(logging.DEBUG, "idempotent_consumer"), guard:
        guard.result = "ran"  # Powertools kept no record of it: the body runs
    [warning] = caplog.records
    assert f"no Powertools key for {guard.key!r} {said}" in warning.getMessage()
    assert SECRET not in caplog.text
    assert "b'SE'" not in caplog.text
