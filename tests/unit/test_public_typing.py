"""What ``mypy --strict`` makes of a user's code: a consumer that uses every public name of ``consumer``,
``consumer.serialization`` and ``persistence`` type-checks clean; decorated functions keep their parameters and
results, processors their record type; and the misuses below are refused, each with its error code.

One in-process mypy run (``mypy.api.run``) over files written to a temporary directory, with its cache there; the
run's time is asserted too, so the suite stays quick.
"""

from __future__ import annotations

import ast
import re
import textwrap
import time
from pathlib import Path

import pytest
from mypy import api

import consumer
import consumer.serialization
import persistence

REPOSITORY = Path(__file__).resolve().parents[2]
PUBLIC = {"consumer": consumer, "consumer.serialization": consumer.serialization, "persistence": persistence}
MYPY_SECONDS = 60

EVERYTHING = textwrap.dedent(
    '''\
    """An SQS consumer on its own table, and the rest of the API around it."""

    from __future__ import annotations

    import asyncio
    import dataclasses
    import datetime
    from collections.abc import Iterator
    from typing import Any

    import pydantic

    from consumer import (
        DEFAULT_KEY_EXPRESSIONS,
        AlreadyProcessed,
        AsyncBatchProcessor,
        BatchEvent,
        BatchEventError,
        BatchProcessingError,
        BatchProcessor,
        BatchSummary,
        Clock,
        DataArgumentError,
        DecodeLimitError,
        DynamoDBStreamRecord,
        EventType,
        HookRecord,
        IdempotencyAlreadyInProgressError,
        IdempotencyConfig,
        IdempotencyConfigError,
        IdempotencyError,
        IdempotencyGuard,
        IdempotencyInconsistentStateError,
        IdempotencyInvalidStatusError,
        IdempotencyItemAlreadyExistsError,
        IdempotencyItemNotFoundError,
        IdempotencyKeyError,
        IdempotencyModelTypeError,
        IdempotencyNoSerializationModelError,
        IdempotencyPersistenceConfigError,
        IdempotencyPersistenceConnectionError,
        IdempotencyPersistenceConsistencyError,
        IdempotencyPersistenceLayerError,
        IdempotencyValidationError,
        InvalidResultError,
        Item,
        ItemTooLargeError,
        KafkaHeaders,
        KafkaRecord,
        KinesisRecord,
        LambdaContext,
        LockLostError,
        Metrics,
        NestedReplayError,
        Outcome,
        PartialBatchResponse,
        PersistenceLayerError,
        PowertoolsCutover,
        RecordModelError,
        ResponseDecodeError,
        ResponseHook,
        SQSRecord,
        SqsFifoPartialProcessor,
        async_batch_processor,
        UnexpectedBatchTypeError,
        WriteConditionError,
        async_process_partial_response,
        batch_processor,
        canonical_json,
        current_guard,
        current_idempotency_key,
        current_lambda_context,
        idempotency_disabled,
        idempotent,
        idempotent_function,
        make_key,
        process_partial_response,
        register_lambda_context,
    )
    from consumer.serialization import (
        BaseIdempotencyModelSerializer,
        BaseIdempotencySerializer,
        CustomDictSerializer,
        DataclassSerializer,
        NoOpSerializer,
        PydanticSerializer,
        serializer_for,
    )
    from persistence import (
        DEFAULT_STORE_THREADS,
        DEFAULT_STORE_URL,
        MAX_ITEM_BYTES,
        STORE_URL_VARIABLE,
        AsyncPersistenceLayer,
        AttributeNames,
        DynamoDBPersistenceLayer,
        IdempotencyError as StoreError,
        IdempotencyRecord,
        InlineStore,
        InMemoryPersistenceLayer,
        ItemTooLargeError as TooLarge,
        LockLostError as Fenced,
        PersistenceLayer,
        PersistenceLayerError as StoreDown,
        RecordStatus,
        SQLitePersistenceLayer,
        ThreadedStore,
        TransactionalStore,
        WriteConditionError as Refused,
        as_async_store,
        is_async_store,
        new_lease,
        record_size,
        store_from_url,
    )


    @dataclasses.dataclass(frozen=True)
    class Receipt:
        order_id: str
        amount: int


    class Refund(pydantic.BaseModel):
        order_id: str
        amount: int


    class FixedClock:
        def __call__(self) -> float:
            return 1_700_000_000.0


    def keep(response: Any, record: IdempotencyRecord) -> Any:
        return response


    clock: Clock = FixedClock()
    def as_powertools_reads_it(response: Any, record: HookRecord) -> Any:
        return {"stored": record.response_json_as_dict(), "text": record.response_data, "key": record.idempotency_key}


    hook: ResponseHook = keep
    powertools_hook: ResponseHook = as_powertools_reads_it
    names = AttributeNames(key="pk")
    store: PersistenceLayer = InMemoryPersistenceLayer() if idempotency_disabled() else SQLitePersistenceLayer("o.db")
    table = DynamoDBPersistenceLayer(table_name="Idempotency", key_attr=names.key)
    configured: PersistenceLayer = store_from_url(DEFAULT_STORE_URL if STORE_URL_VARIABLE else None)
    config = IdempotencyConfig(event_key_jmespath=DEFAULT_KEY_EXPRESSIONS["sqs"], response_hook=hook)
    cutover = PowertoolsCutover(
        table_name="PowertoolsIdempotency",
        until=datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc),
        function="app.record_handler",
        event_key_jmespath="messageId",
    )
    migrating = IdempotencyConfig(event_key_jmespath="messageId", powertools_cutover=cutover)
    sqs = BatchProcessor(EventType.SQS, store=store, config=config, max_workers=4, clock=clock)
    kinesis = BatchProcessor(EventType.KINESIS, store=table, stop_on_first_failure=True)
    streams = AsyncBatchProcessor(EventType.DYNAMODB_STREAMS, store=store, max_concurrency=8)
    kafka = BatchProcessor(EventType.KAFKA, store=store, config=IdempotencyConfig(key_header="Idempotency-Key"))
    thirds = CustomDictSerializer(to_dict=lambda n: {"n": n}, from_dict=lambda d: d["n"])


    @idempotent_function(data_keyword_argument="order", store=store, config=config, clock=clock)
    def charge(order: dict[str, int], *, note: str = "") -> Receipt:
        return Receipt(str(order["id"]), order["amount"])


    @idempotent_function(data_keyword_argument="order", store=store, output_serializer=PydanticSerializer)
    async def refund(order: dict[str, int]) -> Refund:
        await asyncio.sleep(0)
        return Refund(order_id=str(order["id"]), amount=order["amount"])


    @idempotent_function(data_keyword_argument="n", store=store, output_serializer=thirds, name="thirds")
    def third(n: int) -> float:
        return n / 3


    @idempotent(store=store, config=config)
    def handler(event: dict[str, Any], context: LambdaContext | None) -> dict[str, str]:
        with register_lambda_context(context):
            assert current_lambda_context() is context
            receipt: Receipt = charge(order={"id": 1, "amount": 30}, note="first")
            return {"charged": receipt.order_id}


    def on_sqs(record: SQSRecord, guard: IdempotencyGuard) -> Receipt:
        key: str | None = current_idempotency_key()
        assert current_guard() is guard
        return charge(order={"id": len(record.body), "amount": int(guard.key == key)})


    fifo = SqsFifoPartialProcessor(skip_group_on_error=True, store=store)


    def seen(item: Item) -> None:
        print(item.outcome, item.key)


    observed = BatchProcessor(EventType.SQS, store=store, metrics=Metrics(namespace="Orders"), on_outcome=seen)


    def on_kinesis(record: KinesisRecord, *, guard: IdempotencyGuard) -> bytes:
        return record.data


    async def on_stream(record: DynamoDBStreamRecord) -> Refund:
        return await refund(order={"id": len(record.keys), "amount": 1})


    def sqs_handler(event: BatchEvent, context: LambdaContext) -> PartialBatchResponse:
        try:
            return process_partial_response(event, on_sqs, sqs, context)
        except (BatchEventError, UnexpectedBatchTypeError, BatchProcessingError):
            raise
        finally:
            summary: BatchSummary | None = sqs.summary
            outcomes = [item.outcome is Outcome.PROCESSED for item in sqs.items]
            print(summary, outcomes)


    def kinesis_handler(event: BatchEvent, context: LambdaContext) -> PartialBatchResponse:
        process_partial_response(event, lambda record: record.partition_key, kinesis, context)
        return kinesis.process(event, on_kinesis, context)


    class Order(pydantic.BaseModel):  # Powertools' SqsRecordModel, or any model
        messageId: str
        body: str


    orders = BatchProcessor(EventType.SQS, store=store, model=Order)


    def on_order(order: Order) -> str:
        return order.body


    @batch_processor(record_handler=on_order, processor=orders)
    def orders_handler(event: BatchEvent, context: LambdaContext) -> PartialBatchResponse:
        return orders.response()


    @async_batch_processor(record_handler=on_stream, processor=streams)
    def older_streams_handler(event: BatchEvent, context: LambdaContext) -> PartialBatchResponse:
        return streams.response()


    def older_form(records: list[dict[str, Any]], context: LambdaContext) -> PartialBatchResponse:
        with orders(records, on_order, lambda_context=context) as batch:
            outcomes: list[tuple[str, Any, Any]] = batch.process()
        try:
            return batch.response()
        finally:
            failed = [item.error for item in batch.items if isinstance(item.error, RecordModelError)]
            print(outcomes, [(e.item_identifier, e.errors) for e in failed])


    def on_kafka(record: KafkaRecord) -> list[bytes]:
        headers: KafkaHeaders = record.decoded_headers
        value: str | None = record.value  # the event's base64 text, as in Powertools
        decoded: bytes | None = record.decoded_value
        print(record.topic_partition, record.offset, record.decoded_key, record.json_value, headers.get("trace"))
        print(value, decoded, record.key, record.headers, record["topic"], record.get("offset"), len(record))
        return headers.get_all("trace")


    def kafka_handler(event: BatchEvent, context: LambdaContext) -> PartialBatchResponse:
        return process_partial_response(event, on_kafka, kafka, context)


    def streams_handler(event: BatchEvent, context: LambdaContext) -> PartialBatchResponse:
        return async_process_partial_response(event, on_stream, streams, context)


    def guarded(message: dict[str, str]) -> Receipt | None:
        try:
            with IdempotencyGuard(message, store=store, output_serializer=DataclassSerializer(Receipt)) as guard:
                guard.result = Receipt(message["messageId"], 1)
        except AlreadyProcessed as done:
            replayed: Receipt | None = done.response
            return replayed
        except IdempotencyAlreadyInProgressError as busy:
            print(busy.key, busy.existing_record)
            return None
        except DecodeLimitError as bomb:  # before IdempotencyKeyError, which it is
            limit: int = bomb.limit
            raise RuntimeError(bomb.function, limit) from bomb
        except (IdempotencyKeyError, IdempotencyValidationError, ResponseDecodeError) as refused:
            raise RuntimeError(message) from refused
        except (NestedReplayError, InvalidResultError, IdempotencyConfigError, DataArgumentError) as failed:
            raise failed from None
        except WriteConditionError as refused:
            index: int = refused.index
            raise RuntimeError(index, refused.reason, refused.detail) from refused
        except (LockLostError, ItemTooLargeError, PersistenceLayerError, IdempotencyError, Refused):
            raise
        except (Fenced, TooLarge, StoreDown, StoreError):
            raise
        except (IdempotencyModelTypeError, IdempotencyNoSerializationModelError):
            raise
        except (IdempotencyPersistenceLayerError, IdempotencyPersistenceConnectionError):  # Powertools' names
            raise
        except (IdempotencyItemAlreadyExistsError, IdempotencyItemNotFoundError):
            raise
        except (IdempotencyInconsistentStateError, IdempotencyInvalidStatusError):
            raise
        except (IdempotencyPersistenceConfigError, IdempotencyPersistenceConsistencyError):
            raise
        return guard.result if isinstance(guard.result, Receipt) else None


    async def guarded_async(message: dict[str, str]) -> None:
        async with IdempotencyGuard(message, store=as_async_store(store, max_threads=DEFAULT_STORE_THREADS)) as g:
            g.result = canonical_json(message)


    def operate(now_ms: int) -> Iterator[str]:
        lease = new_lease()
        record = IdempotencyRecord.in_progress("local#k", expires_at=now_ms // 1000, lock_deadline_ms=now_ms)
        assert record_size(record, names) < MAX_ITEM_BYTES and lease
        adapter: AsyncPersistenceLayer = as_async_store(store)
        assert isinstance(adapter, (InlineStore, ThreadedStore)) and not is_async_store(store)
        if isinstance(store, TransactionalStore):
            store.queue_write("local#k", [], {"Put": {"TableName": "t", "Item": {}}}, None)
        for stored in store.scan(status=RecordStatus.COMPLETE, limit=10):
            yield stored.key
        yield make_key({"messageId": "m-1"}, config) or str(third(n=3))


    def serializers() -> list[BaseIdempotencySerializer | None]:
        model: BaseIdempotencyModelSerializer = DataclassSerializer.instantiate(Receipt | None)
        return [model, NoOpSerializer(), PydanticSerializer(Refund), serializer_for(list[Receipt])]
    '''
)

REVEALED = textwrap.dedent(
    """\
    from typing import Any

    from consumer import (
        AsyncBatchProcessor,
        BatchProcessor,
        EventType,
        LambdaContext,
        idempotent,
        idempotent_function,
    )
    from persistence import InMemoryPersistenceLayer

    store = InMemoryPersistenceLayer()


    @idempotent_function(data_keyword_argument="order", store=store)
    def charge(order: dict[str, int], *, note: str = "") -> int:
        return order["amount"]


    @idempotent_function(data_keyword_argument="order", store=store)
    async def charge_async(order: dict[str, int], retries: int = 3) -> int:
        return order["amount"]


    @idempotent(store=store)
    def handler(event: dict[str, Any], context: LambdaContext | None) -> list[str]:
        return []


    event_type: EventType = EventType.SQS
    reveal_type(charge)  # charge
    reveal_type(charge_async)  # charge_async
    reveal_type(handler)  # handler
    reveal_type(BatchProcessor(EventType.SQS, store=store))  # sqs
    reveal_type(BatchProcessor(EventType.SQS_FIFO, store=store))  # fifo
    reveal_type(BatchProcessor(EventType.KINESIS, store=store))  # kinesis
    reveal_type(BatchProcessor(EventType.DYNAMODB_STREAMS, store=store))  # streams
    reveal_type(AsyncBatchProcessor(EventType.KINESIS, store=store))  # async kinesis
    reveal_type(BatchProcessor(EventType.KAFKA, store=store))  # kafka
    reveal_type(AsyncBatchProcessor(EventType.KAFKA, store=store))  # async kafka
    reveal_type(BatchProcessor(EventType.KinesisDataStreams, store=store))  # powertools kinesis
    reveal_type(BatchProcessor(EventType.DynamoDBStreams, store=store))  # powertools streams
    reveal_type(AsyncBatchProcessor(EventType.Kafka, store=store))  # powertools kafka
    reveal_type(BatchProcessor(event_type, store=store))  # any source
    """
)

# Each line that mypy must refuse ends with "# refused: [error-code]"; no other line may be refused.
MISUSES = {
    "handler_of_another_source.py": """\
        import asyncio

        from consumer import (
            AsyncBatchProcessor,
            BatchProcessor,
            DynamoDBStreamRecord,
            EventType,
            IdempotencyGuard,
            KafkaRecord,
            KinesisRecord,
            SQSRecord,
            async_process_partial_response,
            process_partial_response,
        )
        from persistence import InMemoryPersistenceLayer

        store = InMemoryPersistenceLayer()
        sqs = BatchProcessor(EventType.SQS, store=store)
        kinesis = BatchProcessor(EventType.KINESIS, store=store)


        def on_kinesis(record: KinesisRecord) -> str:
            return record.partition_key


        def on_stream(record: DynamoDBStreamRecord, guard: IdempotencyGuard) -> None: ...


        def on_sqs(record: SQSRecord, guard: int) -> None: ...


        async def on_kinesis_async(record: KinesisRecord) -> None: ...


        process_partial_response({"Records": []}, on_kinesis, sqs)  # refused: [arg-type]
        sqs.process({"Records": []}, on_kinesis)  # refused: [arg-type]
        process_partial_response({"Records": []}, on_stream, kinesis)  # refused: [arg-type]
        process_partial_response({"Records": []}, on_sqs, sqs)  # refused: [arg-type]
        kafka = BatchProcessor(EventType.KAFKA, store=store)


        def on_kafka(record: KafkaRecord) -> bytes | None:
            return record.decoded_value


        process_partial_response({"records": {}}, on_kafka, kinesis)  # refused: [arg-type]
        kafka.process({"records": {}}, on_kinesis)  # refused: [arg-type]
        kafka.process({"records": {}}, on_kafka)
        async_process_partial_response(
            {"Records": []},
            on_kinesis_async,  # refused: [arg-type]
            AsyncBatchProcessor(EventType.SQS, store=store),
        )
        """,
    "wrong_argument.py": """\
        from typing import Any

        from consumer import LambdaContext, idempotent, idempotent_function
        from persistence import InMemoryPersistenceLayer

        store = InMemoryPersistenceLayer()


        @idempotent_function(data_keyword_argument="order", store=store)
        def charge(order: dict[str, int], *, note: str = "") -> int:
            return order["amount"]


        @idempotent_function(data_keyword_argument="order", store=store)
        async def charge_async(order: dict[str, int]) -> int:
            return order["amount"]


        @idempotent(store=store)
        def handler(event: dict[str, Any], context: LambdaContext | None) -> str:
            return ""


        charge(order={"id": "1"})  # refused: [dict-item]
        charge(order={"id": 1}, note=2)  # refused: [arg-type]
        charge(ordr={"id": 1})  # refused: [call-arg]
        charge({"id": 1}, "note")  # refused: [call-arg]
        total: int = charge_async(order={"id": 1})  # refused: [assignment]
        handler({}, None, 3)  # refused: [call-arg]
        text: int = handler({}, None)  # refused: [assignment]


        @idempotent(store=store)  # refused: [type-var]
        def one_argument(event: dict[str, Any]) -> None: ...
        """,
    "wrong_option.py": """\
        from dataclasses import dataclass

        from consumer import AsyncBatchProcessor, BatchProcessor, EventType, IdempotencyGuard, idempotent_function
        from persistence import InMemoryPersistenceLayer

        store = InMemoryPersistenceLayer()


        @dataclass
        class Receipt:
            amount: int


        BatchProcessor(EventType.SQS, store=store, max_worker=4)  # refused: [call-overload]
        BatchProcessor(EventType.KINESIS, store=store, max_workers="4")  # refused: [call-overload]
        AsyncBatchProcessor(EventType.SQS, store=store, max_workers=4)  # refused: [call-overload]
        BatchProcessor("sqs", store=store)  # refused: [call-overload]
        IdempotencyGuard({}, store=store, output_serializer=Receipt)  # refused: [arg-type]


        @idempotent_function(data_keyword_argument="n", store=store, output_serializer=Receipt)  # refused: [arg-type]
        def count(n: int) -> Receipt:
            return Receipt(n)
        """,
}
REFUSED = re.compile(r"#\s*refused: \[([a-z-]+)\]")
OUTPUT_LINE = re.compile(
    r"^(?P<file>[\w.]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*?)(?:  \[(?P<code>[a-z-]+)\])?$"
)


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Write every file, run mypy once over all of them, and return its status, parsed output and duration."""
    directory = tmp_path_factory.mktemp("public_typing")
    files = {"everything.py": EVERYTHING, "revealed.py": REVEALED}
    files.update({name: textwrap.dedent(source) for name, source in MISUSES.items()})
    for name, source in files.items():
        (directory / name).write_text(source)
    (directory / "mypy.ini").write_text("[mypy]\n")  # not the repository's own configuration
    arguments = ["--strict", "--python-version", "3.10", "--config-file", "mypy.ini", "--cache-dir", ".mypy_cache"]
    arguments += ["--no-color-output", "--no-error-summary", "--show-error-codes", *files]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(directory)
        patch.setenv("MYPYPATH", str(REPOSITORY))  # this checkout, not whatever an editable install points to
        started = time.perf_counter()
        stdout, stderr, status = api.run(arguments)
        seconds = time.perf_counter() - started
    lines = [m.groupdict() for m in map(OUTPUT_LINE.match, stdout.splitlines()) if m]
    unparsed = [line for line in stdout.splitlines() if not OUTPUT_LINE.match(line)]
    return {
        "status": status,
        "lines": lines,
        "unparsed": unparsed,
        "stderr": stderr,
        "seconds": seconds,
        "files": files,
    }


def errors_in(run: dict[str, object], name: str) -> list[dict[str, str]]:
    return [line for line in run["lines"] if line["file"] == name and line["kind"] == "error"]  # type: ignore[attr-defined]


def test_mypy_runs_in_reasonable_time_and_says_only_what_is_parsed(mypy_run):
    assert mypy_run["stderr"] == ""
    assert mypy_run["unparsed"] == []
    assert mypy_run["seconds"] < MYPY_SECONDS, f"mypy took {mypy_run['seconds']:.1f} s"


def test_the_user_file_uses_every_public_name():
    tree = ast.parse(EVERYTHING)
    imported: dict[str, set[str]] = {}
    local_names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in PUBLIC:
            for alias in node.names:
                imported.setdefault(node.module, set()).add(alias.name)
                local_names[alias.asname or alias.name] = alias.name
    for module_name, module in PUBLIC.items():
        missing = set(module.__all__) - imported.get(module_name, set())
        assert not missing, f"the user file does not import {sorted(missing)} from {module_name}"
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    unused = sorted(local for local in local_names if local not in used)
    assert not unused, f"imported but never used: {unused}"


def test_a_consumer_using_every_public_name_is_strict_clean(mypy_run):
    assert errors_in(mypy_run, "everything.py") == []
    assert [line for line in mypy_run["lines"] if line["file"] == "everything.py"] == []


def revealed(run: dict[str, object], label: str) -> str:
    source = run["files"]["revealed.py"]  # type: ignore[index]
    number = next(n for n, line in enumerate(source.splitlines(), 1) if line.endswith(f"# {label}"))
    [note] = [line["text"] for line in run["lines"] if line["file"] == "revealed.py" and int(line["line"]) == number]  # type: ignore[attr-defined]
    return re.sub(r"\b(builtins|consumer(?:\.[a-z_]+)+)\.", "", note.removeprefix("Revealed type is ").strip('"'))


def test_decorated_functions_keep_their_parameters_and_results(mypy_run):
    assert errors_in(mypy_run, "revealed.py") == []
    assert revealed(mypy_run, "charge") == "def (order: dict[str, int], *, note: str =) -> int"
    assert revealed(mypy_run, "charge_async") == (
        "def (order: dict[str, int], retries: int =) -> typing.Coroutine[Any, Any, int]"
    )
    assert revealed(mypy_run, "handler") == "def (event: dict[str, Any], context: LambdaContext | None) -> list[str]"


def test_each_processor_is_typed_by_its_event_source(mypy_run):
    assert revealed(mypy_run, "sqs") == "BatchProcessor[SQSRecord]"
    assert revealed(mypy_run, "fifo") == "BatchProcessor[SQSRecord]"
    assert revealed(mypy_run, "kinesis") == "BatchProcessor[KinesisRecord]"
    assert revealed(mypy_run, "streams") == "BatchProcessor[DynamoDBStreamRecord]"
    assert revealed(mypy_run, "async kinesis") == "AsyncBatchProcessor[KinesisRecord]"
    assert revealed(mypy_run, "kafka") == "BatchProcessor[KafkaRecord]"
    assert revealed(mypy_run, "async kafka") == "AsyncBatchProcessor[KafkaRecord]"
    assert revealed(mypy_run, "powertools kinesis") == "BatchProcessor[KinesisRecord]"
    assert revealed(mypy_run, "powertools streams") == "BatchProcessor[DynamoDBStreamRecord]"
    assert revealed(mypy_run, "powertools kafka") == "AsyncBatchProcessor[KafkaRecord]"
    assert revealed(mypy_run, "any source") == (
        "BatchProcessor[SQSRecord | KinesisRecord | DynamoDBStreamRecord | KafkaRecord]"
    )


@pytest.mark.parametrize("name", MISUSES)
def test_misuses_are_refused_with_their_error_codes(mypy_run, name):
    source = mypy_run["files"][name]
    expected = {
        (number, match.group(1))
        for number, line in enumerate(source.splitlines(), 1)
        if (match := REFUSED.search(line))
    }
    found = {(int(line["line"]), line["code"]) for line in errors_in(mypy_run, name)}
    report = "\n".join(f"{line['line']}: {line['text']} [{line['code']}]" for line in errors_in(mypy_run, name))
    assert found == expected, report


def test_a_kinesis_handler_on_an_sqs_processor_names_both_record_types(mypy_run):
    source = mypy_run["files"]["handler_of_another_source.py"]
    number = next(n for n, line in enumerate(source.splitlines(), 1) if "on_kinesis, sqs)" in line)
    [error] = [
        line["text"] for line in errors_in(mypy_run, "handler_of_another_source.py") if int(line["line"]) == number
    ]
    assert '"Callable[[KinesisRecord], str]"' in error
    assert "Callable[[SQSRecord], Any]" in error
