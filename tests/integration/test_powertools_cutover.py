"""Cut-over from a Powertools table: real Powertools writes first (in bench/.venv), then our consumer reads it through.

Powertools is not installed in .venv, so it runs in a subprocess with bench/.venv's interpreter: a module
``powertools_app`` as a user would have deployed it (the record-handler pattern with ``BatchProcessor``, for SQS,
Kinesis, DynamoDB Streams and Kafka, and ``@idempotent`` on a handler), writing to a table on DynamoDB Local. Our
consumer then gets the same records plus new ones, configured with ``PowertoolsCutover``; ledgers count whose bodies
ran.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from dynamodb_local import canned_answer
from events import ddb_record, kafka_event, kafka_record, kinesis_record, sqs_event, sqs_record

from consumer import (
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyConfigError,
    IdempotencyKeyError,
    IdempotencyValidationError,
    Outcome,
    PersistenceLayerError,
    PowertoolsCutover,
    idempotent,
    idempotent_function,
)
from consumer.keys import make_key
from consumer.sources import item_identifier
from persistence import DynamoDBPersistenceLayer, IdempotencyRecord, InMemoryPersistenceLayer, RecordStatus

ROOT = Path(__file__).resolve().parents[2]
BENCH_PYTHON = ROOT / "bench" / ".venv" / "bin" / "python"
needs_powertools = pytest.mark.skipif(
    not BENCH_PYTHON.exists(),
    reason="bench/.venv (the only environment with aws-lambda-powertools) is missing: `make install` creates it",
)
FUNCTION_NAME = "orders-consumer"  # AWS_LAMBDA_FUNCTION_NAME of both deployments
UNTIL = dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)

POWERTOOLS_APP = '''
"""A Powertools consumer as a user deployed it (run by tests/integration/test_powertools_cutover.py)."""
import json
import os

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.decorators import _get_records_from_event
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.base import _prepare_data

SETTINGS = json.loads(os.environ["POWERTOOLS_APP"])
client = boto3.client("dynamodb", endpoint_url=SETTINGS.get("endpoint"), region_name="us-east-1")
layer = DynamoDBPersistenceLayer(table_name=SETTINGS.get("table", "unused"), boto3_client=client,
                                 **SETTINGS.get("layer", {}))
config = IdempotencyConfig(**SETTINGS.get("config", {}))
processor = BatchProcessor(event_type=EventType.SQS)
ran = []


class Context:
    aws_request_id = "request"
    function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]

    def get_remaining_time_in_millis(self):
        return SETTINGS.get("remaining_ms", 60_000)


def report(**extra):
    print(json.dumps({"ran": ran, **extra}), flush=True)


@idempotent_function(data_keyword_argument="record", config=config, persistence_store=layer)
def record_handler(record):
    order = json.loads(record.body)
    ran.append(record.message_id)
    if order.get("crash"):  # the process dies in the body: its INPROGRESS record stays behind
        report()
        os._exit(0)
    return {"order": order["order"], "charged": order["amount"]}


def place(record):  # the record's id, as our processor names it
    if record.get("messageId"):
        return record.message_id
    if record.get("kinesis"):
        return record.kinesis.sequence_number
    if record.get("dynamodb"):
        return record.dynamodb.sequence_number
    return f"{record.topic}-{record.partition}@{record.offset}"


@idempotent_function(data_keyword_argument="record", config=config, persistence_store=layer)
def source_record_handler(record):  # Powertools' documented batch pattern, for any source it reads
    ran.append(place(record))
    return {"record": place(record), "by": "powertools"}


@idempotent(config=config, persistence_store=layer)
def lambda_handler(event, context):
    ran.append(event["id"])
    return {"booked": event["detail"]["seat"]}


def main():
    context = Context()
    if SETTINGS["run"] == "batch":
        config.register_lambda_context(context)
        response = process_partial_response(SETTINGS["event"], record_handler, processor, context)
        report(response=response)
    elif SETTINGS["run"] == "batches":  # one event per source, each through its own BatchProcessor
        config.register_lambda_context(context)
        responses = [
            process_partial_response(batch["event"], source_record_handler, BatchProcessor(EventType(batch["type"])),
                                     context)
            for batch in SETTINGS["batches"]
        ]
        report(responses=responses)
    elif SETTINGS["run"] == "handler":
        report(responses=[lambda_handler(event, context) for event in SETTINGS["events"]])
    else:  # keys: Powertools' own derivation, one fresh layer per case (a layer keeps its first configuration)
        keys = []
        for case in SETTINGS["cases"]:
            fresh = DynamoDBPersistenceLayer(table_name="unused", boto3_client=client)
            fresh.configure(IdempotencyConfig(**case["config"]), case.get("function"), case.get("key_prefix"))
            if "type" in case:  # what its BatchProcessor hands the record handler, as the decorator hashes it
                reader = BatchProcessor(EventType(case["type"]))
                records = [reader._to_batch_type(r, reader.event_type)
                           for r in _get_records_from_event(case["data"], reader)]
                keys.append([fresh._get_hashed_idempotency_key(_prepare_data(r)) for r in records])
            else:
                keys.append(fresh._get_hashed_idempotency_key(case["data"]))
        report(keys=keys)
'''


def run_powertools(tmp_path: Path, **settings: Any) -> dict[str, Any]:
    """Run ``powertools_app.main()`` in bench/.venv with ``settings``; return what it reported."""
    app = tmp_path / "powertools_app.py"
    if not app.exists():
        app.write_text(textwrap.dedent(POWERTOOLS_APP))
    env = {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": FUNCTION_NAME, "POWERTOOLS_APP": json.dumps(settings)}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(BENCH_PYTHON), "-W", "ignore", "-c", "import powertools_app; powertools_app.main()"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def sqs(message_id: str, order: str, amount: int, **extra: Any) -> dict[str, Any]:
    body = json.dumps({"order": order, "amount": amount, **extra})
    return {
        "messageId": message_id,
        "receiptHandle": f"rh-{message_id}",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
        "messageAttributes": {},
        "md5OfBody": "-",
        "eventSource": "aws:sqs",
        "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
    }


def count_gets(client: Any) -> list[dict[str, Any]]:
    """The GetItem requests ``client`` sends from now on (their bodies)."""
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "before-send.dynamodb.GetItem", lambda request, **_: sent.append(json.loads(request.body))
    )
    return sent


# -- the Powertools table the batch tests read: written once by real Powertools -------------------------------

OLD = [sqs("m-1", "o-1", 30), sqs("m-2", "o-2", 0), sqs("m-3", "o-3", 12)]  # completed by Powertools
LIVE = sqs("m-4", "o-4", 5, crash=True)  # Powertools died in its body; its lock lives 10 minutes
DEAD = sqs("m-5", "o-5", 6, crash=True)  # Powertools died in its body; its lock deadline has passed
SHORT = sqs("m-6", "o-6", 7)  # completed by Powertools with a 1-second expiry: expired when we read it
NEW = [sqs("m-7", "o-7", 8), sqs("m-8", "o-8", 9)]
SKEW_S = 5  # our clock runs this far ahead of Powertools': SHORT has expired, nothing else


@pytest.fixture(scope="module")
def powertools_batch_table(ddb_server, tmp_path_factory) -> str:
    if not BENCH_PYTHON.exists():
        pytest.skip("bench/.venv (with aws-lambda-powertools) is missing: `make install` creates it")
    tmp = tmp_path_factory.mktemp("powertools")
    table = ddb_server.create_table()
    base = {
        "endpoint": ddb_server.endpoint_url,
        "table": table,
        "run": "batch",
        "config": {"event_key_jmespath": "messageId"},
    }
    done = run_powertools(tmp, **base, event={"Records": OLD})
    assert done == {"ran": ["m-1", "m-2", "m-3"], "response": {"batchItemFailures": []}}
    assert run_powertools(tmp, **base, event={"Records": [LIVE]}, remaining_ms=600_000)["ran"] == ["m-4"]
    assert run_powertools(tmp, **base, event={"Records": [DEAD]}, remaining_ms=0)["ran"] == ["m-5"]
    short = {**base, "config": {"event_key_jmespath": "messageId", "expires_after_seconds": 1}}
    assert run_powertools(tmp, **short, event={"Records": [SHORT]})["ran"] == ["m-6"]
    return table


def batch_cutover(table: str, client: Any, monkeypatch: pytest.MonkeyPatch, **options: Any) -> PowertoolsCutover:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME)
    return PowertoolsCutover(
        table_name=table,
        until=options.pop("until", UNTIL),
        function="powertools_app.record_handler",
        event_key_jmespath="messageId",
        boto3_client=client,
        **options,
    )


def our_handler(ran: list[str]) -> Any:
    def record_handler(record: Any) -> Any:
        ran.append(record.message_id)
        order = record.json_body
        return {"order": order["order"], "charged": order["amount"], "by": "us"}

    return record_handler


def skewed() -> float:
    return time.time() + SKEW_S


@needs_powertools
def test_records_powertools_processed_replay_and_new_ones_run_once(
    powertools_batch_table, ddb_server, face, monkeypatch
):
    reader = ddb_server.client()
    gets = count_gets(reader)
    config = IdempotencyConfig(
        event_key_jmespath="messageId", powertools_cutover=batch_cutover(powertools_batch_table, reader, monkeypatch)
    )
    store = DynamoDBPersistenceLayer(table_name=ddb_server.create_table(), boto3_client=ddb_server.client())
    processor = face.processor(
        EventType.SQS, store=store, config=config, clock=skewed, raise_on_entire_batch_failure=False
    )
    ran: list[str] = []
    event = {"Records": [*OLD, LIVE, DEAD, SHORT, *NEW]}

    response = face.process(event, our_handler(ran), processor)

    assert ran == ["m-5", "m-6", "m-7", "m-8"]  # a dead Powertools lock, an expired record, the new ones
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-4"}]}  # in progress in Powertools
    summary = processor.summary
    assert (summary.replayed, summary.in_progress, summary.processed) == (3, 1, 4)
    results = {item.item_id: item.result for item in processor.items}
    assert results["m-1"] == {"order": "o-1", "charged": 30}  # Powertools' own result, not ours
    assert results["m-2"] == {"order": "o-2", "charged": 0}
    assert len(gets) == 8  # one read per record our store did not know
    assert gets[0] == {
        "TableName": powertools_batch_table,
        "Key": {"id": {"S": gets[0]["Key"]["id"]["S"]}},
        "ConsistentRead": True,
    }
    copy = store.get(make_key(OLD[0], config))
    assert copy is not None
    assert copy.status is RecordStatus.COMPLETE
    assert json.loads(copy.response) == {"order": "o-1", "charged": 30}
    assert store.get(make_key(LIVE, config)) is None  # our lock was released: nothing blocks the retry

    again = face.process(event, our_handler(ran), processor)

    assert ran == ["m-5", "m-6", "m-7", "m-8"]  # nothing ran twice
    assert again == {"batchItemFailures": [{"itemIdentifier": "m-4"}]}
    assert len(gets) == 9  # only the record still unknown to our store (m-4) was read again
    assert {i.item_id: i.result for i in processor.items}["m-1"] == {"order": "o-1", "charged": 30}


@needs_powertools
def test_no_read_once_the_window_has_closed(powertools_batch_table, ddb_server, monkeypatch):
    reader = ddb_server.client()
    gets = count_gets(reader)
    until = dt.datetime.fromtimestamp(skewed() - 1, tz=dt.timezone(dt.timedelta(hours=2)))
    cutover = batch_cutover(powertools_batch_table, reader, monkeypatch, until=until)
    config = IdempotencyConfig(event_key_jmespath="messageId", powertools_cutover=cutover)
    processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), config=config, clock=skewed)
    ran: list[str] = []

    assert processor.process({"Records": [*OLD, LIVE]}, our_handler(ran)) == {"batchItemFailures": []}

    assert gets == []
    assert ran == ["m-1", "m-2", "m-3", "m-4"]  # after the window, Powertools' records no longer count


@needs_powertools
def test_a_failed_read_fails_the_record_without_running_it(powertools_batch_table, ddb_server, face, monkeypatch):
    reader = ddb_server.client(Config(retries={"mode": "standard", "max_attempts": 1}))
    error = b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}'
    failing = True

    def answer(request, **_):
        return canned_answer(request.url, 500, error) if failing else None

    reader.meta.events.register("before-send.dynamodb.GetItem", answer)
    config = IdempotencyConfig(
        event_key_jmespath="messageId", powertools_cutover=batch_cutover(powertools_batch_table, reader, monkeypatch)
    )
    store = DynamoDBPersistenceLayer(table_name=ddb_server.create_table(), boto3_client=ddb_server.client())
    processor = face.processor(
        EventType.SQS, store=store, config=config, clock=skewed, raise_on_entire_batch_failure=False
    )
    ran: list[str] = []
    event = {"Records": [OLD[0], NEW[0]]}

    response = face.process(event, our_handler(ran), processor)

    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}, {"itemIdentifier": "m-7"}]}
    assert ran == []
    errors = [item.error for item in processor.items]
    assert all(isinstance(e, PersistenceLayerError) and "injected" in str(e.__cause__) for e in errors), errors
    assert [store.get(make_key(r, config)) for r in event["Records"]] == [None, None]  # locks released

    failing = False
    assert face.process(event, our_handler(ran), processor) == {"batchItemFailures": []}
    assert ran == ["m-7"]  # the redelivery: m-1 replays from Powertools, m-7 runs once
    assert processor.summary.replayed == 1


# -- @idempotent on a handler: the whole event hashed (Powertools' default), a composite-key table -----------

EVENTS = [
    {"id": f"e-{n}", "detail-type": "SeatRequested", "source": "cinema", "detail": {"seat": f"{n}A"}} for n in (1, 2, 3)
]


def our_idempotent_handler(ran: list[str], config: IdempotencyConfig) -> Any:
    @idempotent(store=InMemoryPersistenceLayer(), config=config)
    def handler(event, context):
        ran.append(event["id"])
        return {"booked": event["detail"]["seat"], "by": "us"}

    return handler


@needs_powertools
def test_a_handler_powertools_made_idempotent_replays_its_events(ddb_server, tmp_path, monkeypatch):
    table = ddb_server.create_table(key_attr="pk", sort_key_attr="sk")
    layer = {
        "key_attr": "pk",
        "sort_key_attr": "sk",
        "status_attr": "state",
        "data_attr": "result",
        "expiry_attr": "ttl",
    }
    done = run_powertools(
        tmp_path,
        endpoint=ddb_server.endpoint_url,
        table=table,
        run="handler",
        layer=layer,
        config={"hash_function": "sha256"},
        events=EVENTS[:2],
    )
    assert done["ran"] == ["e-1", "e-2"]
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME)
    cutover = PowertoolsCutover(
        table_name=table,
        until=UNTIL,
        function="powertools_app.lambda_handler",
        hash_function="sha256",
        boto3_client=ddb_server.client(),
        **layer,
    )
    ran: list[str] = []
    handler = our_idempotent_handler(ran, IdempotencyConfig(powertools_cutover=cutover))

    assert [handler(event, None) for event in EVENTS] == [*done["responses"], {"booked": "3A", "by": "us"}]
    assert done["responses"] == [{"booked": "1A"}, {"booked": "2A"}]
    assert ran == ["e-3"]
    assert [handler(event, None) for event in EVENTS] == [*done["responses"], {"booked": "3A", "by": "us"}]
    assert ran == ["e-3"]


@needs_powertools
def test_a_powertools_record_made_for_another_payload_fails_validation(ddb_server, tmp_path, monkeypatch):
    table = ddb_server.create_table()
    settings = {"event_key_jmespath": "id", "payload_validation_jmespath": "detail"}
    run_powertools(
        tmp_path, endpoint=ddb_server.endpoint_url, table=table, run="handler", config=settings, events=EVENTS[:1]
    )
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME)
    cutover = PowertoolsCutover(
        table_name=table,
        until=UNTIL,
        function="powertools_app.lambda_handler",
        boto3_client=ddb_server.client(),
        **settings,
    )
    ran: list[str] = []
    handler = our_idempotent_handler(ran, IdempotencyConfig(event_key_jmespath="id", powertools_cutover=cutover))

    with pytest.raises(IdempotencyValidationError, match="different payload"):
        handler({**EVENTS[0], "detail": {"seat": "9Z"}}, None)
    assert handler(EVENTS[0], None) == {"booked": "1A"}
    assert ran == []


# -- every source of Powertools' batch pattern, with its default key (the whole record), in both of our patterns --


def _sources() -> dict[str, tuple[str, list[dict[str, Any]], Any]]:
    """Per source: Powertools' EventType name (ours has it too), three records, the event holding some of them."""
    image = {"pk": {"S": "acct-1"}, "balance": {"N": "30.50"}}
    return {
        "sqs": ("SQS", [sqs_record(f"s-{n}", {"n": n}) for n in (1, 2, 3)], sqs_event),
        # sqs_event builds {"Records": [...]}, the streams' shape too
        "kinesis": ("KinesisDataStreams", [kinesis_record(n, "p", {"n": n}) for n in (1, 2, 3)], sqs_event),
        "dynamodb": ("DynamoDBStreams", [ddb_record(n, "acct-1", image) for n in (1, 2, 3)], sqs_event),
        "kafka-msk": ("Kafka", [kafka_record("orders", 0, 40 + n, {"n": n}) for n in (1, 2, 3)], kafka_event),
        "kafka-self-managed": (  # another topic: Powertools' key of a Kafka record does not name its cluster
            "Kafka",
            [kafka_record("payments", 1, 7 + n, {"n": n}, key=b"k") for n in (1, 2, 3)],
            lambda *records: kafka_event(*records, self_managed=True),
        ),
    }


SOURCES = _sources()


@pytest.fixture(scope="module")
def powertools_sources_table(ddb_server, tmp_path_factory) -> str:
    """A table where real Powertools completed the first two records of each source, keyed by the whole record."""
    if not BENCH_PYTHON.exists():
        pytest.skip("bench/.venv (with aws-lambda-powertools) is missing: `make install` creates it")
    table = ddb_server.create_table()
    batches = [{"type": kind, "event": event(*records[:2])} for kind, records, event in SOURCES.values()]
    done = run_powertools(
        tmp_path_factory.mktemp("powertools"), endpoint=ddb_server.endpoint_url, table=table, run="batches",
        batches=batches,
    )  # fmt: skip
    assert done["responses"] == [{"batchItemFailures": []}] * len(SOURCES)
    assert len(done["ran"]) == 2 * len(SOURCES)
    return table


@needs_powertools
@pytest.mark.parametrize("pattern", ["processor", "idempotent_function"])
@pytest.mark.parametrize("source", SOURCES)
def test_records_powertools_completed_replay_for_every_source_in_both_patterns(
    powertools_sources_table, ddb_server, monkeypatch, source, pattern
):
    kind, records, event = SOURCES[source]
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME)
    cutover = PowertoolsCutover(  # Powertools' defaults: event_key_jmespath "" hashes the whole record
        table_name=powertools_sources_table,
        until=UNTIL,
        function="powertools_app.source_record_handler",
        boto3_client=ddb_server.client(),
    )
    config = IdempotencyConfig(powertools_cutover=cutover)  # our own default key (the record's id)
    store = DynamoDBPersistenceLayer(table_name=ddb_server.create_table(), boto3_client=ddb_server.client())
    ran: list[str] = []

    def record_handler(record):
        ran.append(item_identifier(record))
        return {"record": item_identifier(record), "by": "us"}

    if pattern == "processor":
        handler, processor = record_handler, BatchProcessor(EventType[kind], store=store, config=config)
    else:  # the function's own guard, on a processor without a store
        handler = idempotent_function(data_keyword_argument="record", store=store, config=config, name=source)(
            record_handler
        )
        processor = BatchProcessor(EventType[kind])

    for replayed in (2, 3):  # Powertools' two, then (redelivered) all three from our store
        assert processor.process(event(*records), handler) == {"batchItemFailures": []}
        ids = [item.item_id for item in processor.items]
        assert ran == ids[2:], f"{source}: records Powertools completed ran again"
        assert [item.result for item in processor.items] == [
            {"record": ids[0], "by": "powertools"},  # Powertools' own results
            {"record": ids[1], "by": "powertools"},
            {"record": ids[2], "by": "us"},
        ]
        assert processor.summary.replayed == replayed


# -- unit: key derivation against Powertools' own, the exact request, the window's configuration -------------

KEY_CASES: list[dict[str, Any]] = [
    {"data": {"messageId": "m-1", "body": "{}"}, "config": {}},
    {"data": {"b": [1, 2.5, {"z": None, "a": True}], "a": "x"}, "config": {"hash_function": "sha256"}},
    {"data": {"name": "Zoë 日本 🎉", "nested": {"é": ["ß", "\u2028"]}}, "config": {}},
    {"data": {"floats": [0.1, 1.0, -0.0, 1e100, 3.141592653589793, 1e-7], "big": 2**70}, "config": {}},
    {"data": [1, "two", None], "config": {"hash_function": "blake2b"}},
    {"data": "just text", "config": {"hash_function": "sha3_256"}},
    {
        "data": {"body": json.dumps({"order_id": "o-1", "lines": [{"sku": "é", "qty": 2}]})},
        "config": {"event_key_jmespath": "powertools_json(body).[order_id, lines]"},
    },
    {
        "data": {"user": {"id": 7, "email": "a@b"}, "product": "p-1"},
        "config": {"event_key_jmespath": "[user.id, product]"},
    },
    {"data": {"user": {"id": 7}}, "config": {"event_key_jmespath": "{u: user.id, p: product}"}},
    {"data": {"user": {"id": 7}}, "config": {"event_key_jmespath": "{u: missing, p: product}"}},  # no key
    {"data": {"a": 0}, "config": {"event_key_jmespath": "a"}},  # 0 is a key
    {"data": {"a": ""}, "config": {"event_key_jmespath": "a"}},  # "" is not
    {
        "data": {"kinesis": {"data": "eyJjbGljayI6ICJjLTEifQ=="}},
        "config": {"event_key_jmespath": "powertools_json(powertools_base64(kinesis.data)).click"},
    },
    # A batch's records, as Powertools' BatchProcessor hands them to the record handler (``type``: its EventType):
    *({"type": kind, "data": event(*records[:2]), "config": {}} for kind, records, event in SOURCES.values()),
    {"type": "Kafka", "data": SOURCES["kafka-msk"][2](*SOURCES["kafka-msk"][1]), "config": {"hash_function": "sha256"}},
    {  # the record as the event carries it has no cluster: no key, as in Powertools
        "type": "Kafka",
        "data": SOURCES["kafka-msk"][2](*SOURCES["kafka-msk"][1]),
        "config": {"event_key_jmespath": "eventSourceArn"},
    },
    {"data": {"id": "x"}, "config": {}, "key_prefix": "orders-v1"},
]


@needs_powertools
def test_keys_are_powertools_own(tmp_path, monkeypatch):
    cases = [{**case, "function": "app.record_handler"} for case in KEY_CASES]
    theirs = run_powertools(tmp_path, run="keys", cases=cases)["keys"]
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME)
    ours = []
    for case in cases:
        config = case["config"]
        cutover = PowertoolsCutover(
            table_name="t", until=UNTIL, function=case["function"], key_prefix=case.get("key_prefix"), **config
        )
        if "type" in case:  # what our guard gets (the processor's record), and the typed record the handler gets
            typed: list[Any] = []
            BatchProcessor(EventType[case["type"]]).process(case["data"], typed.append)
            ours.append([cutover.powertools_key(record.raw) for record in typed])
            assert [cutover.powertools_key(record) for record in typed] == ours[-1]
        else:
            ours.append(cutover.powertools_key(case["data"]))
    assert ours == theirs
    assert all(keys and None not in keys for keys in theirs[13:19])
    assert theirs[19] == [None, None, None]
    assert theirs[0].startswith(f"{FUNCTION_NAME}.app.record_handler#")
    assert theirs[-1].startswith("orders-v1#")
    assert theirs[9] is None
    assert theirs[11] is None


def test_the_read_is_one_consistent_get_of_the_composite_key():
    cutover = PowertoolsCutover(
        table_name="pt",
        until=UNTIL,
        key_prefix="orders",
        sort_key_attr="sk",
        static_pk_value="idempotency#orders",
        event_key_jmespath="messageId",
        boto3_client=_stub_client(),
    )
    key = cutover.powertools_key({"messageId": "m-1"})
    stubber = Stubber(cutover.boto3_client)
    expected = {"TableName": "pt", "Key": {"id": {"S": "idempotency#orders"}, "sk": {"S": key}}, "ConsistentRead": True}
    stubber.add_response("get_item", {}, expected)
    processor = BatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), config=IdempotencyConfig(powertools_cutover=cutover)
    )
    ran = []
    with stubber:
        processor.process({"Records": [{"messageId": "m-1", "body": "{}"}]}, lambda record: ran.append(1))
    stubber.assert_no_pending_responses()
    assert ran == [1]
    assert key == "orders#" + hashlib.md5(b'"m-1"').hexdigest()  # noqa: S324 - Powertools' default hash


def test_expiry_is_judged_to_the_second_and_an_unknown_status_fails_the_record():
    now = 1_900_000_000
    store = InMemoryPersistenceLayer()
    cutover = PowertoolsCutover(
        table_name="pt", until=UNTIL, key_prefix="p", event_key_jmespath="messageId", boto3_client=_stub_client()
    )
    stubber = Stubber(cutover.boto3_client)
    item = {"status": {"S": "COMPLETED"}, "data": {"S": "[0, NaN]"}}
    stubber.add_response("get_item", {"Item": {**item, "expiration": {"N": str(now - 1)}}})  # expired
    stubber.add_response("get_item", {"Item": {**item, "expiration": {"N": str(now)}}})  # this very second: valid
    stubber.add_response("get_item", {"Item": {"status": {"S": "PENDING"}, "expiration": {"N": str(now)}}})
    config = IdempotencyConfig(powertools_cutover=cutover)
    processor = BatchProcessor(
        EventType.SQS, store=store, clock=lambda: now + 0.5, config=config, raise_on_entire_batch_failure=False
    )
    ran, outcomes = [], []
    with stubber:
        for n in range(3):
            processor.process({"Records": [{"messageId": f"m-{n}", "body": "{}"}]}, lambda r: ran.append(r.message_id))
            outcomes.append(processor.items[0])
    assert ran == ["m-0"]
    assert [item.outcome for item in outcomes] == [Outcome.PROCESSED, Outcome.REPLAYED, Outcome.FAILED]
    assert outcomes[1].result[0] == 0
    assert math.isnan(outcomes[1].result[1])
    assert isinstance(outcomes[2].error, PersistenceLayerError)
    assert "not a Powertools record" in str(outcomes[2].error)
    assert store.get(make_key({"messageId": "m-2"}, config)) is None  # our lock was released


def _stub_client() -> Any:
    return boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def test_the_window_end_must_be_timezone_aware():
    with pytest.raises(IdempotencyConfigError, match="timezone-aware"):
        PowertoolsCutover(table_name="pt", until=dt.datetime(2030, 1, 1), key_prefix="p")  # noqa: DTZ001
    with pytest.raises(IdempotencyConfigError, match="function"):
        PowertoolsCutover(table_name="pt", until=UNTIL)
    with pytest.raises(IdempotencyConfigError, match="fixed-length"):
        PowertoolsCutover(table_name="pt", until=UNTIL, key_prefix="p", hash_function="shake_128")
    with pytest.raises(IdempotencyConfigError, match="hashlib"):
        PowertoolsCutover(table_name="pt", until=UNTIL, key_prefix="p", hash_function="new")


def test_the_window_is_a_comparison_with_the_guards_clock():
    until = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    cutover = PowertoolsCutover(table_name="pt", until=until, key_prefix="p")
    end_ms = int(until.timestamp() * 1000)
    assert cutover.is_open(end_ms - 1)
    assert not cutover.is_open(end_ms)
    assert math.isclose(end_ms, cutover._until_ms)


class _ReleaseFails(InMemoryPersistenceLayer):
    def release(self, record: IdempotencyRecord) -> None:
        raise RuntimeError(f"the store is down: {record.key} {record.lease} stay")


def test_a_failed_release_after_a_failed_read_keeps_the_reads_error():
    cutover = PowertoolsCutover(table_name="pt", until=UNTIL, key_prefix="p", boto3_client=_stub_client())
    stubber = Stubber(cutover.boto3_client)
    stubber.add_client_error("get_item", "AccessDeniedException", "not authorized to perform dynamodb:GetItem")
    ran = []
    config = IdempotencyConfig(powertools_cutover=cutover)
    processor = BatchProcessor(EventType.SQS, store=_ReleaseFails(), config=config, raise_on_entire_batch_failure=False)
    with stubber:
        response = processor.process({"Records": [{"messageId": "m-1", "body": "{}"}]}, lambda r: ran.append(1))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert ran == []
    error = processor.items[0].error
    assert isinstance(error, PersistenceLayerError)
    assert "not authorized" in str(error)
    if sys.version_info >= (3, 11):  # exception notes
        assert any("the store is down" in note for note in error.__notes__)


def _cutover_noting_threads():
    """A cut-over on a stubbed client, and the list its ``payload=`` appends the id of each thread it runs in to."""
    threads = []

    def payload(data):
        threads.append(threading.get_ident())
        return data

    cutover = PowertoolsCutover(
        table_name="pt", until=UNTIL, key_prefix="p", event_key_jmespath="messageId", boto3_client=_stub_client(),
        payload=payload,
    )  # fmt: skip
    return cutover, threads


def test_the_async_processor_reads_the_powertools_table_off_the_event_loop_with_an_inline_store():
    # The in-memory store is called on the loop; the cut-over's GetItem is network I/O and must not be.
    cutover, threads = _cutover_noting_threads()
    stubber = Stubber(cutover.boto3_client)
    stubber.add_response("get_item", {})
    processor = AsyncBatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), config=IdempotencyConfig(powertools_cutover=cutover)
    )
    loop_threads = []

    async def handler(record):
        loop_threads.append(threading.get_ident())

    with stubber:
        response = asyncio.run(processor.process({"Records": [{"messageId": "m-1", "body": "{}"}]}, handler))
    assert response == {"batchItemFailures": []}
    assert len(threads) == len(loop_threads) == 1
    assert threads[0] != loop_threads[0]


class _NativeAsyncStore:
    """A native async store (``async def`` calls) over the in-memory one; notes the thread of each call."""

    def __init__(self) -> None:
        self.inner = InMemoryPersistenceLayer()
        self.calls: list[tuple[str, int]] = []

    async def acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        self.calls.append(("acquire", threading.get_ident()))
        return self.inner.acquire(record, now_ms)

    async def complete(self, record: IdempotencyRecord) -> None:
        self.calls.append(("complete", threading.get_ident()))
        await asyncio.sleep(0)
        self.inner.complete(record)

    async def release(self, record: IdempotencyRecord) -> None:
        self.calls.append(("release", threading.get_ident()))
        await asyncio.sleep(0)
        self.inner.release(record)


def test_a_native_async_store_is_read_through_with_its_calls_on_the_loop_and_the_read_off_it():
    # The read-through runs in a thread; a native async store's calls are coroutines of the loop: they run there.
    cutover, threads = _cutover_noting_threads()
    stubber = Stubber(cutover.boto3_client)
    stubber.add_response("get_item", {"Item": {"status": {"S": "COMPLETED"}, "expiration": {"N": "4000000000"},
                                               "data": {"S": '{"charged": 30}'}}})  # fmt: skip
    stubber.add_response("get_item", {"Item": {"status": {"S": "INPROGRESS"}, "expiration": {"N": "4000000000"},
                                               "in_progress_expiration": {"N": "4000000000000"}}})  # fmt: skip
    stubber.add_response("get_item", {})
    store = _NativeAsyncStore()
    config = IdempotencyConfig(powertools_cutover=cutover)
    processor = AsyncBatchProcessor(
        EventType.SQS, store=store, config=config, max_concurrency=1, raise_on_entire_batch_failure=False
    )  # one at a time: the stubbed answers in order
    ran, loop_threads = [], []

    async def handler(record):
        loop_threads.append(threading.get_ident())
        ran.append(record.message_id)
        return "ran"

    event = {"Records": [{"messageId": f"m-{n}", "body": "{}"} for n in range(3)]}
    with stubber:
        response = asyncio.run(processor.process(event, handler))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert ran == ["m-2"]
    assert [item.outcome for item in processor.items] == [Outcome.REPLAYED, Outcome.IN_PROGRESS, Outcome.PROCESSED]
    assert processor.items[0].result == {"charged": 30}
    copy = store.inner.get(make_key({"messageId": "m-0"}, config))
    assert copy is not None
    assert copy.status is RecordStatus.COMPLETE  # the Powertools record's copy, committed to our store
    assert store.inner.get(make_key({"messageId": "m-1"}, config)) is None  # our lock released: in progress there
    loop = loop_threads[0]
    assert {thread for _, thread in store.calls} == {loop}
    assert [call for call, _ in store.calls].count("complete") == 2  # the copy, then m-2's own result
    assert len(threads) == 3
    assert loop not in threads


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_payload_function_that_raises_fails_the_record_unrun_and_releases_our_lock(face):
    # payload= is ours, not Powertools': Powertools may have completed what its function received, so a record whose
    # Powertools key cannot be computed must not run (before, it ran with a warning: "Powertools kept no record").
    def payload(data):
        raise LookupError("no order in this record")

    cutover = PowertoolsCutover(
        table_name="pt", until=UNTIL, key_prefix="p", event_key_jmespath="order_id", boto3_client=_stub_client(),
        payload=payload,
    )  # fmt: skip
    store, ran = InMemoryPersistenceLayer(), []
    config = IdempotencyConfig(powertools_cutover=cutover)
    event = {"Records": [{"messageId": "m-1", "body": "{}"}]}
    if face == "sync":
        processor = BatchProcessor(EventType.SQS, store=store, config=config, raise_on_entire_batch_failure=False)
        response = processor.process(event, lambda record: ran.append(1))
    else:
        processor = AsyncBatchProcessor(EventType.SQS, store=store, config=config, raise_on_entire_batch_failure=False)

        async def handler(record):
            ran.append(1)

        response = asyncio.run(processor.process(event, handler))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert ran == []
    error = processor.items[0].error
    assert isinstance(error, IdempotencyKeyError)
    assert "payload of" in str(error)
    assert isinstance(error.__cause__, LookupError)
    assert list(store.scan()) == []  # our lock released: a fixed payload= runs it on the next delivery
