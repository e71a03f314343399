"""A DynamoDB consumer's cold start imports only what it uses: the rest loads when its name is first used."""

from __future__ import annotations

import os
import subprocess
import sys

DEFERRED = (
    "sqlite3",
    "concurrent.futures",  # a processor of one worker (the default) makes no pool
    "persistence.sqlite",
    "persistence.urls",
    "consumer.cli",
    "consumer.cli._key",
    "consumer.cli._records",
    "consumer.sources._missing_key",
    "consumer.serialization",
    "consumer.sources._kafka",
    "consumer.sources._headers",
    "consumer.sources._record_views",
    "consumer.sources._streams",
    "consumer.sources._attribute_values",
    "consumer.batch._summary",
    "consumer.batch._async_batch",
    "consumer.powertools",
    "consumer.decorators",
    "consumer.observability.metrics",
)


def test_importing_the_library_leaves_what_a_dynamodb_consumer_does_not_use():
    # A check shared by the batch processor and the CLI once pulled the Kafka and header modules into every
    # cold start; nothing else said so.
    code = f"import sys, consumer, persistence; print([m for m in {DEFERRED!r} if m in sys.modules])"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"


def test_a_batch_with_metrics_off_never_imports_the_metrics_module_and_one_with_them_on_does():
    # Metrics are off by default: the module holding their configuration (a frozen dataclass, built when imported)
    # is imported by a processor whose option or environment may turn them on, and by the first use of its name.
    code = (
        "import sys; from consumer import BatchProcessor, EventType; from persistence import InMemoryPersistenceLayer;"
        "p = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), metrics=eval(sys.argv[1]));"
        "p.process({'Records': [{'messageId': 'm', 'body': '{}', 'eventSource': 'aws:sqs'}]}, lambda r: 'ok');"
        "print('consumer.observability.metrics' in sys.modules)"
    )
    for option, environment, imported in (("None", {}, False), ("False", {"IDEMPOTENCY_METRICS": "1"}, False),
                                          ("True", {}, True), ("None", {"IDEMPOTENCY_METRICS": "1"}, True),
                                          ("None", {"IDEMPOTENCY_METRICS": "0"}, True)):  # fmt: skip
        shown = subprocess.run([sys.executable, "-c", code, option], capture_output=True, text=True, check=True,
                               env={**os.environ, **environment}).stdout  # fmt: skip
        assert shown.split()[-1] == str(imported), (option, environment)
    code = "import consumer, consumer.observability as o; assert consumer.Metrics is o.Metrics; print(o.Metrics())"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.startswith("Metrics(namespace='IdempotentConsumer'")


def test_the_stream_records_load_with_the_first_stream_batch_or_name_and_an_sqs_batch_never_loads_them():
    # Each frozen dataclass has its methods generated when its class is made: an SQS function never makes these.
    code = (
        "import sys; from consumer import BatchProcessor, EventType; from persistence import InMemoryPersistenceLayer;"
        "source, records = eval(sys.argv[1]);"
        "p = BatchProcessor(getattr(EventType, source), store=InMemoryPersistenceLayer());"
        "print(p.process({'Records': records}, lambda r: type(r).__name__)['batchItemFailures'],"
        " 'consumer.sources._streams' in sys.modules)"
    )
    sqs = "'SQS', [{'messageId': 'm', 'body': '{}', 'eventSource': 'aws:sqs'}]"
    kinesis = "'KINESIS', [{'eventID': 'e', 'kinesis': {'sequenceNumber': '1', 'partitionKey': 'p', 'data': 'e30='}}]"
    stream = "'DYNAMODB_STREAMS', [{'eventID': 'e', 'dynamodb': {'SequenceNumber': '1', 'Keys': {'k': {'N': '1'}}}}]"
    for records, loaded in ((sqs, False), (kinesis, True), (stream, True)):
        shown = subprocess.run([sys.executable, "-c", code, records], capture_output=True, text=True, check=True)
        assert shown.stdout.split() == ["[]", str(loaded)], (records, shown.stderr)
    code = (
        "import consumer, consumer.sources as s, consumer.sources._streams as m;"
        "assert consumer.KinesisRecord is s.KinesisRecord is m.KinesisRecord;"
        "assert consumer.DynamoDBStreamRecord is s.DynamoDBStreamRecord is m.DynamoDBStreamRecord;"
        "assert {'KinesisRecord', 'DynamoDBStreamRecord'} <= set(dir(consumer)) & set(dir(s)); print('ok')"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "ok\n"


def test_the_only_dataclasses_built_by_the_import_are_the_public_types_a_handler_uses():
    # A dataclass compiles the methods it generates when its class is made, on every cold start: an internal type
    # is a plain slotted class, and a type a handler may never use is made on first use (the stream records, the
    # batch summary).
    code = (
        "import sys, consumer, persistence;"
        "ours = [(n, m) for n, m in list(sys.modules.items()) if n.split('.')[0] in ('consumer', 'persistence')];"
        "print(sorted(f'{n}.{k}' for n, m in ours for k, v in vars(m).items()"
        " if isinstance(v, type) and v.__module__ == n and '__dataclass_fields__' in v.__dict__))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    public = [
        "consumer.config.IdempotencyConfig",
        "consumer.sources.SQSRecord",
        "persistence._attributes.AttributeNames",
        "persistence._record.IdempotencyRecord",
    ]
    assert shown.strip() == str(public)
