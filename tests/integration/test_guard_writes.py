"""``guard.write``: the body's writes commit with the record in one transaction, or not at all.

Against DynamoDB Local (real TransactWriteItems) and a real SQLite file, through both faces; each case is judged
by what the tables hold afterwards.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid

import pytest
from events import sqs_event, sqs_record
from fakes import FakeClock, FakeContext
from ledgers import START, DynamoDBLedger, SQLiteLedger

from consumer import (
    AlreadyProcessed,
    BatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    LockLostError,
    PersistenceLayerError,
    WriteConditionError,
    current_guard,
    idempotent_function,
    process_partial_response,
)
from persistence import (
    DynamoDBPersistenceLayer,
    InMemoryPersistenceLayer,
    RecordStatus,
    SQLitePersistenceLayer,
)
from persistence.redis import RedisPersistenceLayer

RECORD = {"messageId": "m-1", "body": "{}"}


@pytest.fixture(params=["dynamodb", "sqlite"])
def ledger(request, tmp_path):
    if request.param == "sqlite":
        store = SQLitePersistenceLayer(str(tmp_path / "ledger.sqlite3"))
        yield SQLiteLedger.create(store)
        store.close()
        return
    server = request.getfixturevalue("ddb_server")
    store = DynamoDBPersistenceLayer(table_name=server.create_table(), boto3_client=server.client())
    yield DynamoDBLedger.create(server, store)


def debit_body(ledger, amount, transfer_id="t-1", result="debited"):
    def body(guard):
        ledger.debit(guard, amount, transfer_id)
        guard.result = result
        return guard

    return body


def test_the_writes_commit_with_the_record_and_a_duplicate_replays(face, ledger):
    guard = face.guarded(RECORD, debit_body(ledger, 30), store=ledger.store)
    assert guard.committed
    assert ledger.store.get(guard.key).status is RecordStatus.COMPLETE
    with pytest.raises(AlreadyProcessed) as replayed:
        face.guarded(RECORD, debit_body(ledger, 30), store=ledger.store)
    assert replayed.value.response == "debited"
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#t-1"])


@pytest.mark.parametrize(("amount", "index"), [(START + 1, 0), (30, 1)], ids=["debit-refused", "transfer-refused"])
def test_a_refused_condition_writes_nothing_and_releases_the_lock(face, ledger, amount, index):
    if index == 1:  # the transfer exists already: the debit alone would pass, and must not land either
        with IdempotencyGuard({"messageId": "other"}, store=ledger.store) as earlier:
            ledger.debit(earlier, 5, "t-1")
    before = (ledger.balance(), ledger.transfers())
    with pytest.raises(WriteConditionError) as refused:
        face.guarded(RECORD, debit_body(ledger, amount), store=ledger.store)
    assert refused.value.index == index
    assert refused.value.reason in {"ConditionalCheckFailed", "IntegrityError"}
    assert refused.value.key is not None
    assert ledger.store.get(refused.value.key) is None  # released: a redelivery runs the body again
    assert (ledger.balance(), ledger.transfers()) == before
    assert face.guarded(RECORD, debit_body(ledger, 1, "t-2"), store=ledger.store).committed
    assert ledger.balance() == before[0] - 1


def test_a_stale_holder_writes_nothing(face, ledger):
    clock = FakeClock()
    stale = face.enter(IdempotencyGuard(RECORD, store=ledger.store, clock=clock, context=FakeContext(3000, clock)))
    ledger.debit(stale, 30, "stale")
    clock.advance(4.001)  # past its deadline and the grace: another invocation takes it over
    face.guarded(RECORD, debit_body(ledger, 10, "new"), store=ledger.store, clock=clock)
    stale.result = "stale"
    with pytest.raises(LockLostError) as lost:
        face.exit(stale)
    assert lost.value.existing_record.status is RecordStatus.COMPLETE
    assert (ledger.balance(), ledger.transfers()) == (START - 10, ["transfer#new"])


def test_a_body_that_raises_writes_nothing(face, ledger):
    def body(guard):
        ledger.debit(guard, 30)
        raise ValueError("after the writes were queued")

    with pytest.raises(ValueError, match="queued"):
        face.guarded(RECORD, body, store=ledger.store)
    assert (ledger.balance(), ledger.transfers()) == (START, [])
    assert face.guarded(RECORD, debit_body(ledger, 30), store=ledger.store).committed
    assert ledger.balance() == START - 30


def test_deliveries_racing_for_one_key_debit_once(face, ledger):
    outcomes = face.race(4, RECORD, debit_body(ledger, 30), store=ledger.store)
    assert outcomes.count("ran") == 1
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#t-1"])


class OwnStore:
    """A user's store with the life cycle only: no transactions."""

    def __init__(self):
        self.inner = InMemoryPersistenceLayer()

    def acquire(self, record, now_ms):
        return self.inner.acquire(record, now_ms)

    def complete(self, record):
        self.inner.complete(record)

    def release(self, record):
        self.inner.release(record)


@pytest.mark.parametrize("kind", ["own", "redis"])
def test_a_store_without_transactions_refuses_at_the_write_and_says_why(face, kind, request):
    if kind == "own":
        store, why = OwnStore(), r"OwnStore cannot commit writes .* needs a store with queue_write and complete_with"
    else:
        server = request.getfixturevalue("redis_server")
        store, why = (
            RedisPersistenceLayer(url=server.url, key_prefix=f"w{uuid.uuid4().hex}:"),
            "RedisPersistenceLayer cannot .* no Redis transaction spans",
        )
    queued = []

    def body(guard):
        queued.append(guard.key)
        guard.write({"Put": {"TableName": "t", "Item": {}}})

    with pytest.raises(TypeError, match=why):
        face.guarded(RECORD, body, store=store)
    assert len(queued) == 1  # raised in the body, by the write: the lock was released
    assert face.guarded(RECORD, lambda guard: guard, store=store).committed


def test_the_in_memory_store_keeps_the_writes_it_committed_with_their_records(face):
    store = InMemoryPersistenceLayer()

    def body(guard):
        guard.write({"Put": {"TableName": "ledger", "Item": {"id": {"S": "t-1"}}}})
        guard.write("UPDATE accounts SET balance = balance - ?", (30,))
        return guard

    guard = face.guarded(RECORD, body, store=store)
    with pytest.raises(AlreadyProcessed):
        face.guarded(RECORD, body, store=store)
    put = {"Put": {"TableName": "ledger", "Item": {"id": {"S": "t-1"}}}}
    assert store.writes == [(guard.key, put), (guard.key, ("UPDATE accounts SET balance = balance - ?", (30,)))]

    clock = FakeClock()
    stale = face.enter(
        IdempotencyGuard({"messageId": "m-2"}, store=store, clock=clock, context=FakeContext(3000, clock))
    )
    stale.write("stale")
    clock.advance(4.001)
    face.guarded({"messageId": "m-2"}, lambda guard: guard.write("new"), store=store, clock=clock)
    with pytest.raises(LockLostError):
        face.exit(stale)
    assert [write for _, write in store.writes[2:]] == ["new"]


def test_an_unguarded_body_cannot_write(ledger):
    config = IdempotencyConfig(event_key_jmespath="missing", raise_on_no_idempotency_key=False)
    with (
        pytest.raises(RuntimeError, match="unguarded"),
        IdempotencyGuard(RECORD, store=ledger.store, config=config) as g,
    ):
        g.write("UPDATE accounts SET balance = 0")
    assert ledger.balance() == START


def test_a_record_of_a_processor_without_a_store_cannot_write():
    # Its records run unguarded: a write has no record to commit with, and the record fails saying so.
    def handler(record, guard):
        guard.write("UPDATE accounts SET balance = 0")

    processor = BatchProcessor(EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert isinstance(processor.items[0].error, RuntimeError)
    assert "unguarded" in str(processor.items[0].error)


def test_sqlite_refuses_sql_that_cannot_run_when_it_is_queued(tmp_path):
    store = SQLitePersistenceLayer(str(tmp_path / "ledger.sqlite3"))
    SQLiteLedger.create(store)
    with IdempotencyGuard(RECORD, store=store) as guard:
        with pytest.raises(ValueError, match=r"write 0 .* no such table: nowhere") as bad:
            guard.write("UPDATE nowhere SET x = 1")
        assert isinstance(bad.value.__cause__, sqlite3.OperationalError)
        with pytest.raises(TypeError, match="SQL text"):
            guard.write({"Put": {}})
        with pytest.raises(ValueError, match="bindings"):
            guard.write("UPDATE accounts SET balance = ?", ())
    store.close()


def test_a_batch_record_handler_writes_through_its_guard(face, ledger):
    def handler(record, guard):
        amount = int(record.body)
        ledger.debit(guard, amount, record.message_id)
        return amount

    event = sqs_event(sqs_record("m-1", 30), sqs_record("m-2", START), sqs_record("m-1", 30))
    response = face.process(event, handler, face.processor(EventType.SQS, store=ledger.store))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-2"}]}  # its debit was refused: nothing landed
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#m-1"])


def test_an_idempotent_function_writes_through_the_current_guard(face, ledger):
    @idempotent_function(data_keyword_argument="order", store=ledger.store)
    def charge(order):
        ledger.debit(current_guard(), order["amount"], order["id"])
        return order["id"]

    charge = face.define(charge) if face.name == "sync" else _async_charge(ledger)
    assert face.call(charge, order={"id": "o-1", "amount": 30}) == "o-1"
    assert face.call(charge, order={"id": "o-1", "amount": 30}) == "o-1"  # replayed
    assert (ledger.balance(), ledger.transfers()) == (START - 30, ["transfer#o-1"])
    assert current_guard() is None


def _async_charge(ledger):
    @idempotent_function(data_keyword_argument="order", store=ledger.store)
    async def charge(order):
        ledger.debit(current_guard(), order["amount"], order["id"])
        return order["id"]

    return charge


class NativeTransactionalStore:
    """A native async store (``async def``) with the capability: ``queue_write`` plain, ``complete_with`` awaited."""

    def __init__(self):
        self.inner = InMemoryPersistenceLayer()

    async def acquire(self, record, now_ms):
        return self.inner.acquire(record, now_ms)

    async def complete(self, record):
        self.inner.complete(record)

    async def release(self, record):
        self.inner.release(record)

    def queue_write(self, key, writes, item, params):
        self.inner.queue_write(key, writes, item, params)

    async def complete_with(self, record, writes):
        await asyncio.sleep(0)
        if "refused" in writes:
            raise WriteConditionError(key=record.key, index=writes.index("refused"), reason="test", detail=None)
        self.inner.complete_with(record, writes)


def test_a_native_async_store_commits_the_writes_and_releases_on_a_refusal():
    store = NativeTransactionalStore()

    async def deliver(message, *writes):
        async with IdempotencyGuard(message, store=store) as guard:
            for write in writes:
                guard.write(write)

    asyncio.run(deliver({"messageId": "m-1"}, "a", "b"))
    with pytest.raises(WriteConditionError) as refused:
        asyncio.run(deliver({"messageId": "m-2"}, "c", "refused"))
    assert refused.value.index == 1
    assert store.inner.get(refused.value.key) is None  # released
    assert [write for _, write in store.inner.writes] == ["a", "b"]


class UnreleasableStore(NativeTransactionalStore):
    """Its releases fail: the store became unreachable after the refusal."""

    async def release(self, record):
        raise ConnectionError(f"the store is unreachable: {record.key} stays held")


def test_a_refusal_whose_release_fails_is_still_raised_and_the_lock_left_to_expire():
    store, guards = UnreleasableStore(), []

    async def deliver():
        async with IdempotencyGuard({"messageId": "m-1"}, store=store) as guard:
            guards.append(guard)
            guard.write("refused")

    with pytest.raises(WriteConditionError) as refused:
        asyncio.run(deliver())
    assert isinstance(guards[0].release_error, PersistenceLayerError)
    assert isinstance(guards[0].release_error.__cause__, ConnectionError)
    assert store.inner.get(refused.value.key).status is RecordStatus.IN_PROGRESS  # until its lock deadline
    assert store.inner.writes == []
