"""A review of AsyncBatchProcessor's same-key bookkeeping, started only once a second worker is hired (the record
in flight then tracked as still entering its guard, the body-or-enter decision kept by the record's task, the
deadline timer swapping the remaining-time reader, workers busy for their whole life). Nothing here failed on the
merge: each test pins a path it must keep. Several fail when the merge's own mechanisms are undone (the in-flight
record not tracked, a lock met in a body taken for one met entering, the reader not swapped).

Each test defends the promise: every record ends committed after its body ran once, reported in batchItemFailures
(or raised), or replayed from a committed record. Ordering is by barriers (a store that signals when an acquire met
a live lock, ``asyncio.Event``), never by sleeps.
"""

from __future__ import annotations

import asyncio
import collections
import random

import pytest
from events import ddb_record, kinesis_record, sqs_event, sqs_record
from fakes import WAIT_S, FakeContext, MeetingStore, run_stepped

from consumer import (
    AsyncBatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    Outcome,
    async_process_partial_response,
    idempotent_function,
)
from persistence import InMemoryPersistenceLayer, SQLitePersistenceLayer

BY_ORDER = IdempotencyConfig(event_key_jmespath="powertools_json(body).order")


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path) -> MeetingStore:
    inner = InMemoryPersistenceLayer() if request.param == "memory" else SQLitePersistenceLayer(str(tmp_path / "s.db"))
    return MeetingStore(inner)


def order(message_id: str, key: str) -> dict:
    return sqs_record(message_id, {"order": key})


def outcomes(processor) -> dict[str, Outcome | None]:
    return {item.item_id: item.outcome for item in processor.items}


# -- the first record suspends holding a key later records need: they wait, then replay (each key's body once) ----


def ends_once(processor, ran, copies: list[str]) -> None:
    """Of ``copies`` (one key), one body ran once and committed; every other copy replayed it or was reported."""
    assert sum(ran[c] for c in copies) == 1, ran
    got = [outcomes(processor)[c] for c in copies]
    assert got.count(Outcome.PROCESSED) == 1, got
    assert set(got) <= {Outcome.PROCESSED, Outcome.REPLAYED, Outcome.IN_PROGRESS}, got


@pytest.mark.parametrize("concurrency", [1, 2, 100])
@pytest.mark.parametrize("copies", [2, 3])
def test_copies_of_a_suspended_holder_replay_its_result(store, concurrency, copies):
    # Whichever copy takes "k" (with a store in a thread, a later copy's acquire may land first) suspends until
    # every other copy met its lock: they wait for it and replay (with 2 workers and 3 copies one copy may not
    # hold up a group waiting for a worker: reported in progress).
    ran: collections.Counter[str] = collections.Counter()
    names = [f"m{i}" for i in range(copies)]

    async def handler(record):
        ran[record.message_id] += 1
        if record.message_id != "other":  # runs first and never suspends: tracked by no one
            if concurrency > 1:
                await asyncio.to_thread(store.met, copies - 1)
            await asyncio.sleep(0)
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(EventType.SQS, store=store, config=BY_ORDER, max_concurrency=concurrency)
        event = sqs_event(order("other", "x"), *(order(name, "k") for name in names))
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S * 2))
    ends_once(processor, ran, names)
    assert ran["other"] == 1
    if concurrency == 1 or concurrency > copies:
        assert response == {"batchItemFailures": []}


@pytest.mark.parametrize("concurrency", [1, 2, 100])
def test_duplicate_message_ids_run_once(store, concurrency):
    ran: collections.Counter[str] = collections.Counter()

    async def handler(record):
        ran[record.message_id] += 1
        await asyncio.sleep(0)
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=concurrency)
        event = sqs_event(order("a", "1"), order("b", "2"), order("a", "1"), order("a", "1"), order("b", "2"))
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert response == {"batchItemFailures": []}
    assert ran == {"a": 1, "b": 1}
    assert [item.outcome for item in processor.items] == [Outcome.PROCESSED] * 2 + [Outcome.REPLAYED] * 3


@pytest.mark.parametrize("concurrency", [2, 100])
def test_a_record_that_never_suspends_then_copies_that_do(store, concurrency):
    # "quiet" runs inline (no suspension: one worker, nothing tracked); the first copy then holds "k" when a second
    # worker is hired, and is tracked as still entering; the others meet its lock, wait, and replay.
    ran: collections.Counter[str] = collections.Counter()
    names = ["m1", "m2", "m3"]

    async def handler(record):
        ran[record.message_id] += 1
        if record.message_id != "quiet":
            await asyncio.to_thread(store.met, 2)
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(EventType.SQS, store=store, config=BY_ORDER, max_concurrency=concurrency)
        event = sqs_event(order("quiet", "q"), *(order(name, "k") for name in names))
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S * 2))
    ends_once(processor, ran, names)
    assert ran["quiet"] == 1
    if concurrency == 100:
        assert response == {"batchItemFailures": []}


def test_a_holder_that_fails_lets_exactly_one_copy_run(store):
    # The holder tracked as "still entering" fails and releases: of the two copies waiting on it, one runs, the
    # other waits for that one and replays it.
    ran: collections.Counter[str] = collections.Counter()

    async def handler(record):
        ran[record.message_id] += 1
        if ran.total() == 1:  # the first copy to take "k" (with a store in a thread, not always m0)
            await asyncio.to_thread(store.met, 2)
            raise RuntimeError("downstream refused")
        await asyncio.sleep(0)
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(EventType.SQS, store=store, config=BY_ORDER, max_concurrency=3)
        event = sqs_event(order("m0", "k"), order("m1", "k"), order("m2", "k"))
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S * 2))
    assert len(response["batchItemFailures"]) == 1
    assert sum(ran.values()) == 2
    assert sorted(o.value for o in outcomes(processor).values()) == ["failed", "processed", "replayed"]


# -- a nested guard in a body, on the key another record of the batch holds -----------------------------------------


def test_a_nested_guard_on_a_key_held_by_a_tracked_as_entering_record_fails_once(store):
    # "m0" (tracked as entering once the second worker starts) holds "k"; "m1"'s body opens a guard on "k": the
    # lock met in a body fails it (reported), never a wait-and-run-again.
    ran: collections.Counter[str] = collections.Counter()
    holding, met = asyncio.Event(), asyncio.Event()

    async def handler(record):
        ran[record.message_id] += 1
        if record.message_id == "m0":
            holding.set()
            await met.wait()
            return "held"
        await holding.wait()
        try:
            async with IdempotencyGuard(order("m0", "k"), store=store, config=BY_ORDER):
                pass
        finally:
            met.set()
        return "ran"

    async def main():
        processor = AsyncBatchProcessor(
            EventType.SQS, store=store, config=BY_ORDER, max_concurrency=2, raise_on_entire_batch_failure=False
        )
        event = sqs_event(order("m0", "k"), order("m1", "z"))
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, _processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert ran == {"m0": 1, "m1": 1}


# -- the deadline timer fires while copies wait on a holder tracked as entering ------------------------------------


def test_the_deadline_timer_defers_every_waiter_of_a_holder_tracked_as_entering(store):
    # "quiet" runs inline; the first copy to take "k" is in flight when the second worker is hired (tracked as
    # still entering); once both other copies wait on it, the loop's clock jumps past the deadline timer.
    ran: collections.Counter[str] = collections.Counter()
    names = ["m0", "m1", "m2"]

    async def handler(record):
        ran[record.message_id] += 1
        if record.message_id != "quiet":
            await asyncio.to_thread(store.met, 2)
            asyncio.get_running_loop().advance(60)
            await asyncio.sleep(3600)  # cut by the deadline timer
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(
            EventType.SQS, store=store, config=BY_ORDER, max_concurrency=10, raise_on_entire_batch_failure=False
        )
        event = sqs_event(order("quiet", "q"), *(order(name, "k") for name in names))
        return await processor.process(event, handler, FakeContext(remaining_ms=61_000)), processor

    response, processor = run_stepped(main())
    got = outcomes(processor)
    assert sum(ran[name] for name in names) == 1
    holder = next(name for name in names if ran[name])
    assert got.pop("quiet") in {Outcome.PROCESSED, Outcome.FAILED}  # with a store in a thread, cut mid-commit
    assert got.pop(holder) is Outcome.FAILED
    assert set(got.values()) == {Outcome.DEFERRED}
    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} >= set(names)


# -- the whole run cancelled (or interrupted) while holders are tracked; the processor reused afterwards ----------


def test_a_cancelled_run_leaves_nothing_stale_for_the_next_invocation(store):
    # The invocation's task is cancelled while one copy holds "k" (tracked as entering) and the other waits on it;
    # the processor then serves the redelivery: the holder's lock was released, one body runs, the copy replays.
    ran: collections.Counter[str] = collections.Counter()
    processor = AsyncBatchProcessor(EventType.SQS, store=store, config=BY_ORDER, max_concurrency=3)
    event = sqs_event(order("quiet", "x"), order("m0", "k"), order("m1", "k"))
    first = True

    async def handler(record):
        ran[record.message_id] += 1
        if first and record.message_id != "quiet":
            await asyncio.Event().wait()  # until cancelled
        return record.message_id

    async def cancelled_invocation():
        task = asyncio.ensure_future(processor.process(event, handler, FakeContext(remaining_ms=60_000)))
        await asyncio.to_thread(store.met)  # the other copy met the holder's lock, and waits on it
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancelled_invocation(), WAIT_S))
    assert ran["m0"] + ran["m1"] == 1
    first = False
    ran.clear()
    response = async_process_partial_response(event, handler, processor, FakeContext(remaining_ms=60_000))
    assert response == {"batchItemFailures": []}
    ends_once(processor, ran, ["m0", "m1"])  # released by the cancellation: runs now, once; the copy replays
    assert outcomes(processor)["quiet"] in {Outcome.PROCESSED, Outcome.REPLAYED}  # cut before its commit, or not


def test_a_keyboard_interrupt_from_a_holder_then_a_warm_invocation(store):
    ran: collections.Counter[str] = collections.Counter()
    processor = AsyncBatchProcessor(EventType.SQS, store=store, config=BY_ORDER, max_concurrency=3)
    event = sqs_event(order("m0", "k"), order("m1", "k"))
    first = True

    async def handler(record):
        ran[record.message_id] += 1
        if first:  # the copy that took "k" (with a store in a thread, not always m0)
            await asyncio.to_thread(store.met)
            raise KeyboardInterrupt
        await asyncio.sleep(0)
        return record.message_id

    with pytest.raises(KeyboardInterrupt):
        async_process_partial_response(event, handler, processor, FakeContext(remaining_ms=60_000))
    assert ran.total() == 1
    first = False
    ran.clear()
    response = async_process_partial_response(event, handler, processor, FakeContext(remaining_ms=60_000))
    assert response == {"batchItemFailures": []}
    assert ran.total() == 1
    assert sorted(o.value for o in outcomes(processor).values()) == ["processed", "replayed"]


# -- FIFO and streams: one group runs in order; a failure stops the group (FIFO: the batch) -----------------------


@pytest.mark.parametrize("concurrency", [1, 2, 100])
def test_a_fifo_failure_stops_its_group_even_across_the_second_worker(store, concurrency):
    ran: list[str] = []

    async def handler(record):
        ran.append(record.message_id)
        await asyncio.sleep(0)
        if record.message_id == "a1":
            raise RuntimeError("refused")
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(
            EventType.SQS, store=store, max_concurrency=concurrency, skip_group_on_error=True
        )
        event = sqs_event(
            sqs_record("a1", {}, group="a"), sqs_record("b1", {}, group="b"), sqs_record("a2", {}, group="a"),
            sqs_record("a1", {}, group="a"), sqs_record("b2", {}, group="b"),
        )  # fmt: skip
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, _processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    assert failed == ["a1", "a2", "a1"]
    assert ran.count("a1") == 1
    assert "a2" not in ran
    assert sorted(r for r in ran if r.startswith("b")) == ["b1", "b2"]


@pytest.mark.parametrize("concurrency", [1, 2, 100])
def test_kinesis_records_of_one_partition_key_run_in_order_and_stop_at_a_failure(store, concurrency):
    ran: list[int] = []

    async def handler(record):
        n = int(record.sequence_number[4:])  # kinesis_record's numbers: "4959" and the record's index
        ran.append(n)
        await asyncio.sleep(0)
        if n == 1:
            raise RuntimeError("refused")

    async def main():
        processor = AsyncBatchProcessor(EventType.KINESIS, store=store, max_concurrency=concurrency)
        event = {"Records": [kinesis_record(i, "p" if i % 2 else "q", {"n": i}) for i in range(6)]}
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000))

    response = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert [int(f["itemIdentifier"][4:]) for f in response["batchItemFailures"]] == [1, 3, 5]
    assert [n for n in ran if n % 2] == [1]  # partition "p" stops at its failure
    assert [n for n in ran if not n % 2] == [0, 2, 4]  # partition "q" runs on, in order


# -- a nested AsyncBatchProcessor inside a record ----------------------------------------------------------------


def test_a_nested_async_batch_in_a_record_runs_its_records_once(store):
    # Two outer records run inner batches at once whose records share the key "n": an inner record meeting the
    # other inner batch's lock is not that batch's to wait for (reported in its inner response, which fails its
    # outer record: redelivered); "n"'s body runs once over all of them, and the outer copies of "a" end once.
    ran: collections.Counter[str] = collections.Counter()
    inner = AsyncBatchProcessor(EventType.SQS, store=store, config=BY_ORDER, max_concurrency=3)

    async def inner_handler(record):
        ran["inner-" + record.message_id] += 1
        await asyncio.sleep(0)
        return record.message_id

    async def outer_handler(record):
        ran[record.message_id] += 1
        await asyncio.sleep(0)
        sub = sqs_event(order(f"{record.message_id}-i0", "n"), order(f"{record.message_id}-i1", "n"))
        response = await inner.process(sub, inner_handler)
        if response["batchItemFailures"]:
            raise RuntimeError(response)
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(
            EventType.SQS, store=store, config=BY_ORDER, max_concurrency=3, raise_on_entire_batch_failure=False
        )
        event = sqs_event(order("o0", "a"), order("o1", "b"), order("o2", "a"))
        return await processor.process(event, outer_handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert sum(v for k, v in ran.items() if k.startswith("inner-")) == 1  # key "n" runs once over all batches
    got = outcomes(processor)
    assert ran["o1"] == 1
    for item_id, outcome in got.items():
        assert outcome in {Outcome.PROCESSED, Outcome.REPLAYED, Outcome.FAILED, Outcome.IN_PROGRESS}, item_id
    assert [got["o0"], got["o2"]].count(Outcome.PROCESSED) <= 1
    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {
        item_id for item_id, outcome in got.items() if outcome in {Outcome.FAILED, Outcome.IN_PROGRESS}
    }


# -- the deadline timer due at once: workers hired after it fired start no record -----------------------------------


def test_workers_hired_after_the_deadline_timer_fired_start_no_record(store):
    # Exactly the margin left: the first record starts (the margin is what a record may not go below) and the timer
    # is due at once. It fires before the second worker is hired: the workers hired afterwards, never cancelled,
    # must find no time left (the swapped remaining-time reader) and defer every record they take.
    ran: collections.Counter[str] = collections.Counter()

    async def handler(record):
        ran[record.message_id] += 1
        await asyncio.Event().wait()  # cut by the deadline timer
        return record.message_id

    async def main():
        processor = AsyncBatchProcessor(
            EventType.SQS, store=store, config=BY_ORDER, max_concurrency=10, raise_on_entire_batch_failure=False
        )
        event = sqs_event(order("m0", "k"), order("m1", "k"), order("m2", "x"), order("m3", "y"))
        return await processor.process(event, handler, FakeContext(remaining_ms=1_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert ran.total() <= 1
    assert ran["m1"] == ran["m2"] == ran["m3"] == 0
    assert outcomes(processor) == {
        "m0": Outcome.FAILED,
        "m1": Outcome.DEFERRED,
        "m2": Outcome.DEFERRED,
        "m3": Outcome.DEFERRED,
    }
    assert len(response["batchItemFailures"]) == 4


def test_a_body_that_swallows_the_deadline_cancellation_commits_and_its_copy_is_deferred(store):
    # The holder's body catches the timer's cancellation and returns: its guard commits (ending 1); the copy waiting
    # on it is deferred (reported), never run.
    ran: collections.Counter[str] = collections.Counter()

    async def handler(record):
        ran[record.message_id] += 1
        await asyncio.to_thread(store.met)
        asyncio.get_running_loop().advance(60)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    async def main():
        processor = AsyncBatchProcessor(
            EventType.SQS, store=store, config=BY_ORDER, max_concurrency=10, raise_on_entire_batch_failure=False
        )
        event = sqs_event(order("m0", "k"), order("m1", "k"))
        return await processor.process(event, handler, FakeContext(remaining_ms=61_000)), processor

    response, processor = run_stepped(main())
    assert ran.total() == 1
    got = sorted(o.value for o in outcomes(processor).values())
    assert got == ["deferred", "processed"]
    assert len(response["batchItemFailures"]) == 1


@pytest.mark.parametrize("concurrency", [1, 2, 100])
def test_copies_through_an_idempotent_function_record_handler_run_once(concurrency):
    ran: collections.Counter[str] = collections.Counter()
    memory = InMemoryPersistenceLayer()

    @idempotent_function(
        data_keyword_argument="record", store=memory, config=IdempotencyConfig(event_key_jmespath="body")
    )
    async def handler(record):
        ran[record.message_id] += 1
        await asyncio.sleep(0)
        return "charged"

    async def main():
        processor = AsyncBatchProcessor(EventType.SQS, max_concurrency=concurrency)
        event = sqs_event(*(sqs_record(f"m{i}", "same", raw_body=True) for i in range(4)))
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert response == {"batchItemFailures": []}
    assert ran == {"m0": 1}
    assert [item.outcome for item in processor.items] == [Outcome.PROCESSED] + [Outcome.REPLAYED] * 3


@pytest.mark.parametrize("concurrency", [1, 2, 100])
def test_a_stream_failure_stops_the_rest_of_its_partition_key(store, concurrency):
    ran: list[str] = []

    async def handler(record):
        ran.append(record.event_id)
        await asyncio.sleep(0)
        if record.event_id == "ddb-1":
            raise RuntimeError("refused")

    async def main():
        processor = AsyncBatchProcessor(EventType.DYNAMODB_STREAMS, store=store, max_concurrency=concurrency)
        event = {"Records": [ddb_record(i, "p" if i < 4 else "q", {"pk": {"S": "p"}}) for i in range(6)]}
        return await processor.process(event, handler, FakeContext(remaining_ms=60_000)), processor

    response, _processor = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [f"{i:021d}" for i in (1, 2, 3)]
    assert sorted(ran) == ["ddb-0", "ddb-1", "ddb-4", "ddb-5"]


# -- random batches: copies, FIFO groups, failures, nested guards, the deadline, an interrupt ---------------------

_REPORTED = {Outcome.FAILED, Outcome.IN_PROGRESS, Outcome.DEFERRED, Outcome.SKIPPED}
_BEHAVIOURS = ["quiet", "yield", "fail", "nested", "nested-yield", "deadline", "interrupt"]


def _random_batch(rnd: random.Random) -> list[dict]:
    size = rnd.randint(1, 8)
    fifo = rnd.random() < 0.3
    records: dict[str, dict] = {}
    batch = []
    for i in range(size):
        message_id = f"m{rnd.randint(0, size)}" if rnd.random() < 0.3 else f"u{i}"
        body = {"order": f"k{rnd.randint(0, 2)}", "do": rnd.choice(_BEHAVIOURS), "nest": f"k{rnd.randint(0, 2)}"}
        group = f"g{rnd.randint(0, 1)}" if fifo else None
        batch.append(records.setdefault(message_id, sqs_record(message_id, body, group=group)))  # a copy: one body
    return batch


def _check_invocation(processor, response, ran, pending) -> set[str]:
    """Every record has an outcome, reported ones are in batchItemFailures and no others, no body ran twice."""
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    copies = collections.Counter(r["messageId"] for r in pending)
    assert all(ran[m] <= copies[m] for m in ran), (ran, copies)  # a copy may run after the one it copies failed
    for item in processor.items:
        assert item.outcome is not None, item.item_id
        assert item.outcome is not Outcome.PROCESSED or ran[item.item_id] >= 1
    assert failed == {item.item_id for item in processor.items if item.outcome in _REPORTED}
    return failed


@pytest.mark.parametrize("seed", range(0, 400, 4))
def test_random_batches_end_every_record_once(seed, tmp_path):
    # Up to six invocations redeliver what each reported. Per invocation: every record has an outcome, reported
    # ones are in batchItemFailures and no others; no record's body runs twice (a copy may run after the one it
    # copies failed). Over all of them: no key is committed twice.
    rnd = random.Random(seed)
    store = InMemoryPersistenceLayer() if seed % 8 else SQLitePersistenceLayer(str(tmp_path / "s.db"))
    completes: collections.Counter[str] = collections.Counter()
    complete = store.complete
    store.complete = lambda record: (completes.update([record.key]), complete(record))[1]
    pending = _random_batch(rnd)
    processor = AsyncBatchProcessor(
        EventType.SQS, store=store, config=BY_ORDER, max_concurrency=rnd.choice([1, 2, 3, 100]),
        raise_on_entire_batch_failure=False, skip_group_on_error=rnd.random() < 0.5,
    )  # fmt: skip
    for attempt in range(6):
        if not pending:
            break
        ran: collections.Counter[str] = collections.Counter()

        async def handler(record, attempt=attempt, ran=ran):
            body = record.json_body
            ran[record.message_id] += 1
            do = body["do"] if attempt < 2 else "yield"
            if do in {"yield", "nested-yield"}:
                await asyncio.sleep(0)
            if do == "fail":
                raise RuntimeError(do)
            if do.startswith("nested"):
                async with IdempotencyGuard(sqs_record("nest", {"order": body["nest"]}), store=store, config=BY_ORDER):
                    await asyncio.sleep(0)
            if do == "deadline":
                asyncio.get_running_loop().advance(60)
                await asyncio.sleep(3600)
            if do == "interrupt":
                raise KeyboardInterrupt
            return body["order"]

        try:
            response = run_stepped(processor.process(sqs_event(*pending), handler, FakeContext(remaining_ms=61_000)))
        except KeyboardInterrupt:
            continue
        failed = _check_invocation(processor, response, ran, pending)
        pending = [r for r in pending if r["messageId"] in failed]
    assert all(count == 1 for count in completes.values()), completes
