"""The same consumer written with each library: a BatchProcessor whose record handler is idempotent,
keyed by ``messageId``, with a trivial body.
"""

from __future__ import annotations

from typing import Any


def ours(store: Any = None, *, max_workers: int = 1, use_local_cache: bool = False):  # noqa: ANN201
    """Our handler: ``handler(event, context) -> partial batch response``."""
    from consumer import BatchProcessor, EventType, IdempotencyConfig, process_partial_response
    from persistence import InMemoryPersistenceLayer

    config = IdempotencyConfig(event_key_jmespath="messageId", use_local_cache=use_local_cache)
    processor = BatchProcessor(
        EventType.SQS, store=store or InMemoryPersistenceLayer(), config=config, max_workers=max_workers
    )

    def record_handler(record: Any) -> dict[str, str]:
        return {"ok": record.message_id}

    def handler(event: dict[str, Any], context: Any) -> Any:
        return process_partial_response(event, record_handler, processor, context)

    return handler


def powertools(store: Any = None, *, use_local_cache: bool = False, kafka: bool = False):  # noqa: ANN201
    """The Powertools handler, as its documentation writes it: for SQS, or with ``kafka`` for an MSK event (its
    batch utility names Kafka failures by partition and offset)."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from powertools_memory import PowertoolsMemoryLayer

    key = KAFKA_KEY if kafka else "messageId"
    config = IdempotencyConfig(event_key_jmespath=key, use_local_cache=use_local_cache)
    processor = BatchProcessor(event_type=EventType.Kafka if kafka else EventType.SQS)
    persistence = store or PowertoolsMemoryLayer()

    @idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)
    def record_handler(record: Any) -> dict[str, Any]:
        return {"ok": record.offset if kafka else record.message_id}

    def handler(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )

    return handler


def ours_async(store: Any = None, *, max_concurrency: int = 100):  # noqa: ANN201
    """Our async handler: an ``async def`` record handler under ``AsyncBatchProcessor``, from a sync handler."""
    from consumer import AsyncBatchProcessor, EventType, IdempotencyConfig, async_process_partial_response
    from persistence import InMemoryPersistenceLayer

    config = IdempotencyConfig(event_key_jmespath="messageId")
    processor = AsyncBatchProcessor(
        EventType.SQS, store=store or InMemoryPersistenceLayer(), config=config, max_concurrency=max_concurrency
    )

    async def record_handler(record: Any) -> dict[str, str]:
        return {"ok": record.message_id}

    def handler(event: dict[str, Any], context: Any) -> Any:
        return async_process_partial_response(event, record_handler, processor, context)  # runs its own loop

    return handler


def powertools_async(store: Any = None):  # noqa: ANN201
    """Powertools' async processor with its documented idempotency pattern, the only one it has.

    Its ``AsyncBatchProcessor`` awaits an ``async def`` record handler (a sync one is refused: "Sync record
    handler not supported", its docs' "Processing messages asynchronously"); its idempotency is sync only: async
    support was declined because the AWS SDK blocks (github.com/aws-powertools/powertools-lambda-python/issues/4483,
    closed as rejected). What its idempotency docs show for batches ("Common use cases > Batch processing",
    examples/idempotency/src/integrate_idempotency_with_batch_processor.py) is a sync
    ``@idempotent_function(data_keyword_argument="record")``; here the async record handler calls it, so every
    store call blocks the event loop. ``async_process_partial_response`` runs its own loop (``asyncio.run``
    outside Lambda), with every record at once (``asyncio.gather``).
    """
    from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from powertools_memory import PowertoolsMemoryLayer

    config = IdempotencyConfig(event_key_jmespath="messageId")
    processor = AsyncBatchProcessor(event_type=EventType.SQS)
    persistence = store or PowertoolsMemoryLayer()

    @idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)
    def process(record: Any) -> dict[str, str]:
        return {"ok": record.message_id}

    async def record_handler(record: Any) -> dict[str, str]:
        return process(record=record)

    def handler(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        return async_process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )

    return handler


KAFKA_KEY = "[topic, partition, offset]"  # our default; spelt out for Powertools


def ours_kafka():  # noqa: ANN201
    """Our Kafka handler: the record's topic, partition and offset are its key (the default)."""
    from consumer import BatchProcessor, EventType, process_partial_response
    from persistence import InMemoryPersistenceLayer

    processor = BatchProcessor(EventType.KAFKA, store=InMemoryPersistenceLayer())

    def record_handler(record: Any) -> dict[str, int]:
        return {"ok": record.offset}

    def handler(event: dict[str, Any], context: Any) -> Any:
        return process_partial_response(event, record_handler, processor, context)

    return handler


def powertools_kafka():  # noqa: ANN201
    """The Powertools handler for an MSK event."""
    return powertools(kafka=True)


def kafka_event(count: int, partitions: int = 4) -> dict[str, Any]:
    """An MSK event of ``count`` records spread over ``partitions`` partitions of one topic."""
    records: dict[str, list[dict[str, Any]]] = {}
    for i in range(count):
        partition = i % partitions
        records.setdefault(f"orders-{partition}", []).append(
            {
                "topic": "orders",
                "partition": partition,
                "offset": i // partitions,
                "timestamp": 1700000000000,
                "timestampType": "CREATE_TIME",
                "key": "Y3VzdG9tZXI=",
                "value": "eyJvcmRlcl9pZCI6IDEsICJhbW91bnQiOiAzMH0=",
                "headers": [{"Idempotency-Key": [107, 45, 49]}],
            }
        )
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/orders/a1b2c3d4-5678-90ab-cdef-1234567890ab-2"
    return {"eventSource": "aws:kafka", "eventSourceArn": arn, "bootstrapServers": "b-1:9098", "records": records}


def sqs_event(count: int, offset: int = 0) -> dict[str, Any]:
    """An SQS event of ``count`` records with distinct message ids."""
    return {
        "Records": [
            {
                "messageId": f"{offset + i:08d}-2f0c-4c1b-9d37-0e2d4f1a7c01",
                "receiptHandle": "AQEB",
                "body": '{"order_id": %d, "amount": 30}' % (offset + i),  # noqa: UP031 - a template
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
                "messageAttributes": {},
                "md5OfBody": "0" * 32,
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:orders",
                "awsRegion": "eu-west-1",
            }
            for i in range(count)
        ]
    }
