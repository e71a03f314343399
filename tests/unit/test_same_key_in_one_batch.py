"""Two records of one batch with the same key, running at once (``max_workers`` > 1, real threads or tasks).

The second to reach its guard meets the first one's lock. It used to fail as held by "another invocation", and
on Kafka (and Kinesis) its failure failed the rest of its partition: a spurious redelivery of the whole tail. Now
it waits for the holder, a record of its own batch, to end, then replays its result (or runs, if it failed).

The holder's body waits until the other record has met its lock (``MeetingStore.met``), so the conflict happens
on every run, not by chance; before the fix the test then sees the failure.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from events import kafka_event, kafka_failures, kafka_record, kinesis_record, sqs_event, sqs_record
from fakes import WAIT_S, FakeClock, FakeContext, MeetingStore, run_stepped

from consumer import (
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfig,
    IdempotencyGuard,
    Outcome,
)
from persistence import InMemoryPersistenceLayer, SQLitePersistenceLayer

HEADER = IdempotencyConfig(key_header="Idempotency-Key")


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path) -> MeetingStore:
    inner = InMemoryPersistenceLayer() if request.param == "memory" else SQLitePersistenceLayer(str(tmp_path / "s.db"))
    return MeetingStore(inner)


def keyed(partition: int, offset: int, key: bytes) -> dict:
    return kafka_record("orders", partition, offset, {"p": partition}, headers=[("Idempotency-Key", key)])


def outcomes(processor) -> dict[str, str]:
    return {item.item_id: item.outcome.value for item in processor.items}


def test_a_producer_retry_in_another_partition_replays_instead_of_failing_that_partition(store):
    # orders-0 and orders-1 each start with the same producer key; orders-2's key is held by another invocation,
    # which is not waited for. Each partition has a record after the first.
    elsewhere = IdempotencyGuard(keyed(9, 0, b"held-elsewhere"), store=store.inner, config=HEADER).__enter__()
    event = kafka_event(
        keyed(0, 10, b"same"), keyed(0, 11, b"a"), keyed(1, 20, b"same"), keyed(1, 21, b"b"),
        keyed(2, 30, b"held-elsewhere"), keyed(2, 31, b"c"),
    )  # fmt: skip
    runs = []

    def handler(record):
        runs.append(record.offset)
        if record.decoded_headers["idempotency-key"] == b"same":
            assert store.met(2)  # meanwhile orders-2@30 meets the other lock, and the other "same" record this one
        return f"ran {record.offset}"

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=3, raise_on_entire_batch_failure=False
    )
    started = time.monotonic()
    response = processor.process(event, handler, FakeContext(remaining_ms=60_000))
    assert kafka_failures(response) == [("orders-2", 30), ("orders-2", 31)]  # only the lock of another invocation
    assert time.monotonic() - started < WAIT_S  # that one was not waited for (nor to its deadline)
    got = outcomes(processor)
    pair = sorted([got["orders-0@10"], got["orders-1@20"]])
    assert pair == ["processed", "replayed"]
    assert (got["orders-0@11"], got["orders-1@21"], got["orders-2@30"]) == ("processed", "processed", "in_progress")
    holder = 10 if got["orders-0@10"] == "processed" else 20
    assert sorted(runs) == sorted([holder, 11, 21])
    replayed = next(i for i in processor.items if i.outcome is Outcome.REPLAYED)
    processed = next(i for i in processor.items if i.item_id in ("orders-0@10", "orders-1@20") and i is not replayed)
    assert replayed.result == processed.result  # the holder's result, replayed
    assert store.meetings >= 2
    elsewhere.__exit__(None, None, None)


def test_a_holder_that_fails_lets_the_waiting_record_run(store):
    def handler(record):
        if record.decoded_headers["idempotency-key"] == b"same" and store.meetings == 0:
            assert store.met()
            raise ValueError("the holder fails")  # its lock is released: the other record runs the work

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=2, raise_on_entire_batch_failure=False
    )
    response = processor.process(kafka_event(keyed(0, 10, b"same"), keyed(1, 20, b"same")), handler)
    got = outcomes(processor)
    assert sorted(got.values()) == ["failed", "processed"]
    failed = next(item for item in processor.items if item.outcome is Outcome.FAILED)
    assert kafka_failures(response) == [(failed.record.topic_partition, failed.record.offset)]


def test_a_holder_stopped_by_a_base_exception_still_wakes_the_waiting_record(store):
    ran = []

    def handler(record):
        ran.append(record.offset)
        if len(ran) == 1:
            assert store.met()
            raise KeyboardInterrupt  # the guard releases its lock; the waiter must not sleep to its deadline

    processor = BatchProcessor(EventType.KAFKA, store=store, config=HEADER, max_workers=2)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        processor.process(kafka_event(keyed(0, 10, b"same"), keyed(1, 20, b"same")), handler, FakeContext(60_000))
    assert sorted(ran) == [10, 20]  # the waiting record woke, took the released lock and ran
    assert time.monotonic() - started < WAIT_S


class RealTimeContext:
    """A Lambda context whose remaining time runs with the wall clock."""

    def __init__(self, remaining_ms: int) -> None:
        self._ends = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return int((self._ends - time.monotonic()) * 1000)


def test_a_wait_ends_at_the_deadline_margin_and_the_record_is_deferred(store):
    # 300 ms before the margin: the holder outlasts them, so the other record is deferred (not run, redelivered).
    released = threading.Event()

    def handler(record):
        assert store.met()
        released.wait(1)  # longer than the waiting record may wait

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=2, raise_on_entire_batch_failure=False
    )
    started = time.monotonic()
    event = kafka_event(keyed(0, 10, b"same"), keyed(1, 20, b"same"), keyed(1, 21, b"b"))
    response = processor.process(event, handler, RealTimeContext(1300))
    got = outcomes(processor)
    holder, waiter = sorted(["orders-0@10", "orders-1@20"], key=lambda item_id: got[item_id] != "processed")
    assert (got[holder], got[waiter]) == ("processed", "deferred")
    # orders-1@21 comes back too: skipped after its partition's waiter, or deferred (after its holder, past the margin).
    assert [f"{p}@{o}" for p, o in kafka_failures(response)] == [waiter, "orders-1@21"]
    assert time.monotonic() - started < 2  # the waiting record gave up after some 300 ms, the holder after 1 s


def test_three_partitions_with_one_key_each_wait_in_turn():
    # The holder fails; of the two waiting, one runs and the other waits again, for it, then replays.
    store = MeetingStore(InMemoryPersistenceLayer())
    lock, ran = threading.Lock(), []

    def handler(record):
        with lock:
            ran.append(record.offset)
            first = len(ran) == 1
        if first:
            assert store.met(2)  # both other records met this lock
            raise ValueError("the first holder fails")

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=3, raise_on_entire_batch_failure=False
    )
    processor.process(kafka_event(keyed(0, 1, b"k"), keyed(1, 2, b"k"), keyed(2, 3, b"k")), handler)
    assert sorted(outcomes(processor).values()) == ["failed", "processed", "replayed"]
    assert len(ran) == 2


def test_kinesis_records_of_two_partition_keys_with_one_payload_key_replay_too():
    store = MeetingStore(InMemoryPersistenceLayer())
    config = IdempotencyConfig(event_key_jmespath="powertools_json(powertools_base64(kinesis.data)).order")

    def handler(record):
        assert store.met()

    event = {"Records": [kinesis_record(1, "a", {"order": "o-1"}), kinesis_record(2, "b", {"order": "o-1"})]}
    processor = BatchProcessor(EventType.KINESIS, store=store, config=config, max_workers=2)
    assert processor.process(event, handler) == {"batchItemFailures": []}
    assert (processor.summary.processed, processor.summary.replayed) == (1, 1)


def test_async_records_wait_for_a_holder_of_their_own_batch(store):
    async def handler(record):
        await asyncio.to_thread(store.met)  # the other task meets this lock meanwhile
        return record.offset

    async def main():
        processor = AsyncBatchProcessor(EventType.KAFKA, store=store, config=HEADER, max_concurrency=2)
        event = kafka_event(keyed(0, 10, b"same"), keyed(0, 11, b"x"), keyed(1, 20, b"same"), keyed(1, 21, b"y"))
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(main())
    assert response == {"batchItemFailures": []}
    assert (processor.summary.processed, processor.summary.replayed) == (3, 1)
    assert store.meetings >= 1


class FailingReleaseStore(MeetingStore):
    """Its releases fail: a holder whose body failed leaves its lock behind until the lock's deadline."""

    def release(self, record):
        raise ConnectionError(f"the store is unreachable: {record.key} stays held under {record.lease}")


def test_a_lock_that_outlives_its_holder_is_tried_once_more_then_in_progress():
    store = FailingReleaseStore(InMemoryPersistenceLayer())
    ran = []

    def handler(record):
        ran.append(record.offset)
        assert store.met()
        raise ValueError("the holder fails, and its lock cannot be released")

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=2, raise_on_entire_batch_failure=False
    )
    started = time.monotonic()
    processor.process(kafka_event(keyed(0, 10, b"same"), keyed(1, 20, b"same")), handler, FakeContext(60_000))
    assert sorted(outcomes(processor).values()) == ["failed", "in_progress"]
    assert len(ran) == 1
    assert store.meetings == 2  # the waiting record tried once more after its holder ended, not again and again
    assert time.monotonic() - started < WAIT_S


def test_only_a_lock_met_entering_is_waited_for_not_one_a_nested_guard_meets_in_the_body(store):
    # orders-1@20 and orders-2@30 share key "b" (a producer's retry): one holds it, the other waits and replays.
    # orders-0@10's body opens a guard of its own on key "b": that lock is met in its body, which fails, once; it
    # is not waited for, or the body would run again.
    holding = threading.Event()
    ran = []

    def handler(record):
        ran.append(record.offset)
        if record.decoded_headers["idempotency-key"] == b"b":
            holding.set()
            assert store.met(2)  # the nested guard and the other "b" record both meet this lock
        else:
            assert holding.wait(WAIT_S)
            with IdempotencyGuard(keyed(1, 20, b"b"), store=store, config=HEADER):
                pass

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=3, raise_on_entire_batch_failure=False
    )
    response = processor.process(kafka_event(keyed(0, 10, b"a"), keyed(1, 20, b"b"), keyed(2, 30, b"b")), handler)
    assert kafka_failures(response) == [("orders-0", 10)]
    got = outcomes(processor)
    assert got["orders-0@10"] == "in_progress"
    assert sorted([got["orders-1@20"], got["orders-2@30"]]) == ["processed", "replayed"]
    assert len(ran) == 2  # orders-0@10's body once, and the holder's


def test_a_waiting_record_does_not_start_after_the_batch_stopped(store):
    # stop_on_first_failure: the holder fails and releases; its waiting copy must not start once the batch stopped.
    def handler(record):
        if record.offset in (10, 20):  # whichever copy of "k" took the lock first fails; the other never runs
            assert store.met()
            raise ValueError("downstream is down")
        return record.offset

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=2, stop_on_first_failure=True,
        raise_on_entire_batch_failure=False,
    )  # fmt: skip
    processor.process(kafka_event(keyed(0, 10, b"k"), keyed(1, 20, b"k"), keyed(1, 21, b"x")), handler, FakeContext())
    got = outcomes(processor)
    assert sorted([got["orders-0@10"], got["orders-1@20"]]) == ["failed", "skipped"]
    assert got["orders-1@21"] == "skipped"
    assert list(store.scan()) == []  # nothing ran to a commit


def test_a_record_does_not_hold_up_groups_waiting_for_a_worker(store):
    # Two workers, four partitions: the copy of a slow holder's key does not wait while partitions wait for a
    # worker (it fails as in progress, as another invocation's lock makes it): the bystanders run meanwhile.
    release = threading.Event()

    def handler(record):
        if record.partition < 2:  # whichever copy of "k" took the lock first is the holder; the other never runs
            assert store.met()
            assert release.wait(WAIT_S)  # the holder is slow until every bystander ran
        else:
            ran.append(record.offset)
            if len(ran) == 2:
                release.set()
        return record.offset

    ran: list[int] = []
    event = kafka_event(keyed(0, 0, b"k"), keyed(1, 100, b"k"), keyed(2, 200, b"x"), keyed(3, 300, b"y"))
    processor = BatchProcessor(EventType.KAFKA, store=store, config=HEADER, max_workers=2)
    processor.process(event, handler, FakeContext())
    got = outcomes(processor)
    assert sorted([got["orders-0@0"], got["orders-1@100"]]) == ["in_progress", "processed"]
    assert sorted(ran) == [200, 300]


def test_a_copy_does_not_wait_while_a_group_waits_for_the_worker_a_finished_group_gave_back():
    # Three workers, five partitions. orders-0 finishes while orders-1 (the holder of "k") and orders-2 run: its
    # worker takes orders-3, so orders-4 still waits for one when orders-2's copy of "k" meets the holder's lock.
    # The copy must not wait (it fails as in progress): the holder waits for orders-4, which would wait for the copy.
    store = MeetingStore(InMemoryPersistenceLayer())
    holding, second_started, third_started, fourth_started = (threading.Event() for _ in range(4))

    def handler(record):
        if record.partition == 0:
            assert holding.wait(WAIT_S)
            assert second_started.wait(WAIT_S)  # three groups run: this one ends with every worker busy
        elif record.partition == 1:
            holding.set()
            assert store.met()
            assert fourth_started.wait(WAIT_S)
        elif record.offset == 200:
            second_started.set()
            assert third_started.wait(WAIT_S)  # orders-3 took orders-0's worker: the copy comes next
        elif record.partition == 3:
            third_started.set()
            assert fourth_started.wait(WAIT_S)  # orders-4 starts once the copy gave its worker back
        else:
            fourth_started.set()
        return record.offset

    event = kafka_event(
        keyed(0, 0, b"x"), keyed(1, 100, b"k"), keyed(2, 200, b"w"), keyed(2, 201, b"k"), keyed(3, 300, b"y"),
        keyed(4, 400, b"z"),
    )  # fmt: skip
    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=3, raise_on_entire_batch_failure=False
    )
    started = time.monotonic()
    response = processor.process(event, handler, FakeContext())
    assert time.monotonic() - started < WAIT_S
    assert kafka_failures(response) == [("orders-2", 201)]
    got = outcomes(processor)
    assert got.pop("orders-2@201") == "in_progress"
    assert set(got.values()) == {"processed"}


def test_a_copy_meeting_its_holder_with_just_the_margin_left_is_deferred_at_once(store):
    # Exactly the margin is left, and it stays so: every record starts (the margin is what a record may not go below),
    # but no record may wait. The copy that meets the holder's lock is deferred at once, with the key and the lock it
    # met; had it waited for the holder, it would have tried again and replayed past the margin.
    def handler(record):
        assert store.met()  # the holder's body: the other copy meets its lock meanwhile
        return record.offset

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=HEADER, max_workers=2, deadline_margin_ms=1000,
        raise_on_entire_batch_failure=False,
    )  # fmt: skip
    event = kafka_event(keyed(0, 10, b"same"), keyed(1, 20, b"same"))
    response = processor.process(event, handler, FakeContext(remaining_ms=1000))
    holder, copy = sorted(processor.items, key=lambda item: item.outcome is not Outcome.PROCESSED)
    assert (holder.outcome, copy.outcome) == (Outcome.PROCESSED, Outcome.DEFERRED)
    assert kafka_failures(response) == [(copy.record.topic_partition, copy.record.offset)]
    assert copy.key == holder.key is not None  # named in its log record
    assert isinstance(copy.error, IdempotencyAlreadyInProgressError)
    assert copy.error.key == holder.key


def test_without_a_deadline_a_copy_meeting_a_lock_in_its_last_millisecond_is_in_progress(store):
    # No Lambda context: a wait ends by the holder's lock deadline alone. The holder moves the clock to that deadline
    # before the copy enters (orders-1's first record waits for it): the lock is still live, with no time left to
    # wait, so the copy is in progress (as under another invocation's lock), not replayed after the holder.
    clock = FakeClock()
    moved = threading.Event()
    config = IdempotencyConfig(key_header="Idempotency-Key", lock_timeout_seconds=10)

    def handler(record):
        if record.offset == 20:
            assert moved.wait(WAIT_S)
        elif record.offset == 10:
            clock.advance(10)  # the holder's lock now ends this very millisecond
            moved.set()
            assert store.met()
        return record.offset

    processor = BatchProcessor(
        EventType.KAFKA, store=store, config=config, clock=clock, max_workers=2, raise_on_entire_batch_failure=False
    )
    response = processor.process(kafka_event(keyed(0, 10, b"k"), keyed(1, 20, b"a"), keyed(1, 21, b"k")), handler)
    assert kafka_failures(response) == [("orders-1", 21)]
    holder, copy = processor.items[0], processor.items[2]
    assert (holder.outcome, copy.outcome) == (Outcome.PROCESSED, Outcome.IN_PROGRESS)
    assert copy.key == holder.key is not None
    assert isinstance(copy.error, IdempotencyAlreadyInProgressError)


def test_a_copy_waiting_on_a_cutover_replay_replays_too(tmp_path):
    # The holder takes our lock, then its read of the Powertools table finds the record COMPLETED and replays
    # without ever holding the lock past its enter: the copy that met the lock meanwhile tries again and replays.
    import datetime as dt  # noqa: PLC0415 - this test's alone
    import json  # noqa: PLC0415 - this test's alone

    from consumer import PowertoolsCutover  # noqa: PLC0415 - this test's alone

    store = MeetingStore(SQLitePersistenceLayer(str(tmp_path / "s.db")))

    class PowertoolsTable:  # a boto3 client stand-in: Powertools committed the first payload before the cut-over
        def __init__(self) -> None:
            self.asked: list[object] = []

        def get_item(self, **request: object) -> dict:
            self.asked.append(request["Key"])
            if request["Key"] != self.asked[0]:
                return {}  # not a record Powertools processed
            assert store.met()  # the other partition's copy meets our lock while the table is read
            item = {"status": {"S": "COMPLETED"}, "data": {"S": json.dumps({"charged": 1})}}
            return {"Item": {**item, "expiration": {"N": str(int(time.time()) + 3600)}}}

    cutover = PowertoolsCutover(
        table_name="t", until=dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc), key_prefix="pt",
        event_key_jmespath="value", boto3_client=PowertoolsTable(),
    )  # fmt: skip
    config = IdempotencyConfig(key_header="Idempotency-Key", powertools_cutover=cutover)
    processor = BatchProcessor(EventType.KAFKA, store=store, config=config, max_workers=2)
    same, other = {"order": 1}, {"order": 2}  # what Powertools keyed (event_key_jmespath="value")
    event = kafka_event(
        kafka_record("orders", 0, 10, same, headers=[("Idempotency-Key", b"k")]),
        kafka_record("orders", 1, 20, same, headers=[("Idempotency-Key", b"k")]),
        kafka_record("orders", 1, 21, other, headers=[("Idempotency-Key", b"other")]),
    )
    response = processor.process(event, lambda record: record.offset, FakeContext())
    assert kafka_failures(response) == []
    got = outcomes(processor)
    assert (got["orders-0@10"], got["orders-1@20"], got["orders-1@21"]) == ("replayed", "replayed", "processed")


def test_an_async_record_waiting_when_the_deadline_timer_fires_is_deferred(store):
    # The remaining time stands still, so the timer (set as the batch starts) fires before the wait's own budget
    # (counted from when the wait began) runs out: the waiter is cut by the timer. Its body never started, so it
    # is deferred, as a sync wait that runs out of time is; the holder cut mid-body has failed. The timer fires
    # when the holder, once the other record met its lock, moves the loop's clock to it (60 s before the margin).
    async def handler(record):
        await asyncio.to_thread(store.met)
        asyncio.get_running_loop().advance(60)
        await asyncio.sleep(3600)  # cut by the deadline timer

    async def main():
        processor = AsyncBatchProcessor(
            EventType.KAFKA, store=store, config=HEADER, max_concurrency=2, raise_on_entire_batch_failure=False
        )
        event = kafka_event(keyed(0, 10, b"same"), keyed(1, 20, b"same"))
        return await processor.process(event, handler, FakeContext(remaining_ms=61_000)), processor

    started = time.monotonic()
    response, processor = run_stepped(main())
    assert time.monotonic() - started < WAIT_S
    assert sorted(outcomes(processor).values()) == ["deferred", "failed"]
    assert len(kafka_failures(response)) == 2
    waiter = next(item for item in processor.items if item.outcome is Outcome.DEFERRED)
    assert waiter.key is not None  # named in its log record


@pytest.mark.parametrize(("partitions", "concurrency"), [(3, 3), (7, 10), (3, 10)])
def test_async_copies_wait_when_every_group_has_a_worker(store, partitions, concurrency):
    # A worker hired but not yet started takes a queued group: it is not one that group waits for. Counting it as
    # busy made the copy fail as in progress (and skip the rest of its partition) though no group lacked a worker.
    async def handler(record):
        await asyncio.sleep(0.05)
        return record.offset

    async def main():
        processor = AsyncBatchProcessor(EventType.KAFKA, store=store, config=HEADER, max_concurrency=concurrency)
        others = [keyed(p, 100 * p, f"o{p}".encode()) for p in range(2, partitions)]
        event = kafka_event(
            keyed(0, 10, b"same"), keyed(0, 11, b"a"), keyed(1, 20, b"same"), keyed(1, 21, b"b"), *others
        )
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(main())
    assert response == {"batchItemFailures": []}
    assert sorted(outcomes(processor).values()).count("replayed") == 1
    assert processor.summary.processed == len(processor.items) - 1


def test_an_async_copy_does_not_hold_up_groups_waiting_for_a_worker(store):
    # The async twin of the sync test above: two workers, four partitions; the copy fails as in progress.
    ran: list[int] = []

    async def handler(record):
        if record.partition < 2:  # the holder: slow until every bystander ran
            await asyncio.to_thread(store.met)
            for _ in range(WAIT_S * 100):
                if len(ran) == 2:
                    break
                await asyncio.sleep(0.01)
        else:
            ran.append(record.offset)
        return record.offset

    async def main():
        processor = AsyncBatchProcessor(EventType.KAFKA, store=store, config=HEADER, max_concurrency=2)
        event = kafka_event(keyed(0, 0, b"k"), keyed(1, 100, b"k"), keyed(2, 200, b"x"), keyed(3, 300, b"y"))
        await processor.process(event, handler, FakeContext(remaining_ms=60_000))
        return processor

    processor = asyncio.run(main())
    got = outcomes(processor)
    assert sorted([got["orders-0@0"], got["orders-1@100"]]) == ["in_progress", "processed"]
    assert sorted(ran) == [200, 300]


@pytest.mark.parametrize("order", ["a", None], ids=["guarded", "unguarded"])
def test_an_async_record_begun_before_records_ran_at_once_fails_on_a_lock_its_body_meets(store, order):
    # Record "first" starts while one task runs the batch; its body suspends, which calls in a second worker, and
    # only then are the batch's tries tracked (its own as one still entering its guard). Record "holder" holds
    # order "b" meanwhile, and the first one's body opens a guard of its own on "b": met in its body, that lock
    # fails it, once. Taken for a lock its enter met, it would be waited for and the body run again: only the
    # task's own account knows its body had started, guarded or not.
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body).order", raise_on_no_idempotency_key=False)
    holder = sqs_record("holder", {"order": "b"})
    ran: list[str] = []
    holding, met = asyncio.Event(), asyncio.Event()

    async def handler(record):
        ran.append(record.message_id)
        if record.message_id == "holder":
            holding.set()
            await met.wait()
            return "held"
        await holding.wait()
        try:
            async with IdempotencyGuard(holder, store=store, config=config):
                pass
        finally:
            met.set()
        return "ran"

    async def main():
        processor = AsyncBatchProcessor(
            EventType.SQS, store=store, config=config, max_concurrency=2, raise_on_entire_batch_failure=False
        )
        event = sqs_event(sqs_record("first", {} if order is None else {"order": order}), holder)
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert response == {"batchItemFailures": [{"itemIdentifier": "first"}]}
    assert {item.item_id: item.outcome for item in processor.items} == {
        "first": Outcome.IN_PROGRESS,
        "holder": Outcome.PROCESSED,
    }
    assert sorted(ran) == ["first", "holder"]  # each body once
