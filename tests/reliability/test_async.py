"""The async face under load and under cancellation, on real stores (SQLite files, DynamoDB Local).

- Many asyncio tasks in one event loop, then two processes each running such a loop, deliver overlapping
  batches (duplicates within and across batches) through ``async_process_partial_response``, redelivering what
  is reported failed until nothing is: every message's effect happens exactly once, nothing is lost, and every
  delivery of a record ends in one of the three ways (processed, replayed, or reported in batchItemFailures).
- Cancellation never leaves a commit without its body, nor a lock nobody will use: a timeout around
  ``async with IdempotencyGuard``, the processor's own deadline, the invocation's task cancelled from outside,
  and a cancellation that arrives while a store call is in flight in its thread.

Sizes: short under ``make test``, long under ``make reliability`` (the ``long_form`` fixture).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import multiprocessing
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from events import sqs_event, sqs_record
from fakes import FakeContext, run_stepped
from harness import (
    assert_exactly_once,
    assert_nothing_lost,
    async_recording_handler,
    batch_with_duplicates,
    effects,
    failed_ids,
    key_of,
)

from consumer import (
    AlreadyProcessed,
    AsyncBatchProcessor,
    EventType,
    IdempotencyConfig,
    IdempotencyGuard,
    Outcome,
    async_process_partial_response,
)
from persistence import RecordStatus
from samples.ledger import Ledger

CONFIG = IdempotencyConfig(lock_timeout_seconds=120)
BATCH_SIZE = 10  # SQS's default batch size
MAX_ROUNDS = 500  # redeliveries before a scenario gives up on a record
STORES = ["sqlite", "dynamodb", "redis"]  # shared across processes and reached through the ThreadedStore
ONE_LOOP_STORES = ["memory", *STORES]  # the in-memory store lives in one process


async def advance_when(ready: Callable[[], bool], seconds: float) -> None:
    """Once ``ready()`` (asked in a thread: it may call a store) holds, move the loop's clock ``seconds`` on."""
    while not await asyncio.to_thread(ready):  # noqa: ASYNC110 - a condition on a store: no event to await
        await asyncio.sleep(0.005)
    asyncio.get_running_loop().advance(seconds)


# -- the three ways a delivery ends ----------------------------------------------------------------------


@dataclass
class Tally:
    """Every delivery of every record and how it ended, checked as each batch returns."""

    deliveries: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    processed: collections.Counter[str] = field(default_factory=collections.Counter)
    results: dict[str, set[str]] = field(default_factory=dict)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)

    def add(self, items: list[Any], failed: set[str]) -> None:
        """One batch's items and the ids its response reported failed."""
        self.deliveries += len(items)
        assert failed <= {item.item_id for item in items}, "a failure reported for a record not in the batch"
        for item in items:
            assert item.outcome is not None, f"{item.item_id} has no outcome"
            self.outcomes[item.outcome.value] += 1
            if item.outcome.succeeded:
                assert item.outcome in {Outcome.PROCESSED, Outcome.REPLAYED}, item.outcome
                self.results.setdefault(item.item_id, set()).add(item.result)
                self.processed[item.item_id] += item.outcome is Outcome.PROCESSED
            else:
                assert item.item_id in failed, f"{item.item_id} ended {item.outcome.value} but was not reported"
                if item.error is not None and item.outcome is Outcome.FAILED:
                    self.errors[type(item.error).__name__] += 1

    def merge(self, other: Tally) -> None:
        """Add another worker's tally to this one."""
        self.deliveries += other.deliveries
        self.outcomes += other.outcomes
        self.processed += other.processed
        self.errors += other.errors
        for message_id, results in other.results.items():
            self.results.setdefault(message_id, set()).update(results)

    def faults(self) -> str:
        """The conflicts and failures met on the way, for the figures."""
        text = f"{self.outcomes['in_progress']} lock conflicts"
        return text + "".join(f", {n} {name}" for name, n in sorted(self.errors.items()))


def check_tally(tally: Tally, ledger: Ledger, scenario: str, ids: set[str]) -> None:
    """Each id was PROCESSED by exactly one delivery, by the worker the ledger names, and every success of it
    (its run and all its replays) returned that worker's result."""
    assert set(tally.processed) == ids
    assert {k: n for k, n in tally.processed.items() if n != 1} == {}
    by_id = dict(ledger.entries(scenario))
    wrong = {k: (r, by_id[k]) for k, r in tally.results.items() if r != {by_id[k]}}
    assert not wrong, f"replays of another run's result: {dict(list(wrong.items())[:5])}"


async def deliver_until_done(processor, records, handler, tally: Tally, batch_size: int = BATCH_SIZE) -> None:
    """Deliver ``records`` in batches, redelivering whatever each response reports failed, until none is."""
    pending = list(records)
    for _ in range(MAX_ROUNDS):
        retry: list[dict[str, Any]] = []
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            failed = failed_ids(await async_process_partial_response(sqs_event(*batch), handler, processor))
            tally.add(processor.items, failed)
            retry += [r for r in batch if r["messageId"] in failed]
        if not retry:
            return
        pending = retry
        await asyncio.sleep(0.005)  # SQS's visibility timeout: let the holders of those locks finish
    raise AssertionError(f"{len(pending)} records still failing after {MAX_ROUNDS} redeliveries")


def new_processor(store: Any, max_concurrency: int) -> AsyncBatchProcessor:
    """A processor that reports rather than raises when a whole batch is in progress elsewhere."""
    return AsyncBatchProcessor(
        EventType.SQS,
        store=store,
        config=CONFIG,
        max_concurrency=max_concurrency,
        raise_on_entire_batch_failure=False,
    )


def jostled(records: list[dict[str, Any]], rng: random.Random, reach: int = 3 * BATCH_SIZE) -> list[dict[str, Any]]:
    """``records`` in nearly their order (each moved by up to ``reach`` places), so concurrent deliverers reach
    the same records at about the same time and meet each other's locks."""
    order = sorted(range(len(records)), key=lambda i: i + rng.uniform(0, reach))
    return [records[i] for i in order]


async def run_tasks(
    factory, records, *, ledger_path: str, scenario: str, tasks: int, worker: str, first_body=None
) -> Tally:
    """``tasks`` concurrent tasks on one loop, each delivering every record in its own order: even tasks share
    one processor and store, odd tasks have their own (their own connection or client and thread pool). Each
    task delivers every record, in an order of its own close to the others' (``jostled``). ``first_body`` (a
    :class:`FirstBody`) is called, on the loop, as each body starts."""
    shared = new_processor(factory(), max_concurrency=5)
    ledger = Ledger(ledger_path)

    async def task(n: int) -> Tally:
        rng = random.Random(f"{worker}-{n}")
        processor = shared if n % 2 == 0 else new_processor(factory(), max_concurrency=rng.choice([1, 3, 10]))
        handler = async_recording_handler(ledger, scenario, f"{worker}t{n}", rng, max_delay=0.003, first=first_body)
        tally = Tally()
        await deliver_until_done(processor, jostled(records, rng), handler, tally)
        return tally

    total = Tally()
    for tally in await asyncio.gather(*(task(n) for n in range(tasks))):
        total.merge(tally)
    return total


def check_every_effect_once(factory, records, tally: Tally, *, ledger_path: str, scenario: str, report) -> None:
    """The scenario's end: each effect exactly once, every record COMPLETE, each delivery accounted for."""
    ids = {r["messageId"] for r in records}
    ledger = Ledger(ledger_path)
    doubles = assert_exactly_once(ledger, scenario, ids)
    lost = assert_nothing_lost(factory(), {r["messageId"]: key_of(r, CONFIG) for r in records}, set())
    check_tally(tally, ledger, scenario, ids)
    report(
        records=len(ids),
        deliveries=tally.deliveries,
        duplicates=tally.deliveries - len(ids),
        faults=tally.faults(),
        double_effects=doubles,
        lost=lost,
    )


# -- 1. many tasks, one loop -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ONE_LOOP_STORES, indirect=True)
def test_eight_tasks_in_one_loop_deliver_overlapping_batches_exactly_once(race_factory, tmp_path, long_form, report):
    unique, duplicates = (1000, 300) if long_form else (40, 12)
    records = batch_with_duplicates(unique, duplicates, seed=21)
    ledger_path = str(tmp_path / "ledger.sqlite3")
    run = run_tasks(race_factory, records, ledger_path=ledger_path, scenario="async-tasks", tasks=8, worker="w")
    tally = asyncio.run(run)
    check_every_effect_once(
        race_factory, records, tally, ledger_path=ledger_path, scenario="async-tasks", report=report
    )


# -- 2. two processes, each a loop of tasks --------------------------------------------------------------


class FirstBody:
    """Holds a process at its first body until the other process has entered one too, so both hold a lock before
    either commits: the processes race whatever the scheduler does (a process that started late would otherwise
    find every record already COMPLETE).

    It blocks the event loop rather than awaiting: the waiting process claims no more records meanwhile, so it
    holds at most what its batches had in flight (``tasks * BATCH_SIZE``), and the other process, delivering
    more records than that, finds one free.
    """

    def __init__(self, barrier: Any) -> None:
        self.barrier, self.passed = barrier, False

    def __call__(self) -> None:
        if not self.passed:
            self.passed = True
            self.barrier.wait(timeout=120)  # broken: a BrokenBarrierError fails the record, and the test below


def _process_worker(factory, records, first_body, results, options) -> None:
    worker = options["worker"]
    try:
        tally = asyncio.run(run_tasks(factory, records, first_body=FirstBody(first_body), **options))
        results.put((worker, tally))
    except BaseException as e:
        results.put((worker, e))
        raise


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", STORES, indirect=True)
def test_two_processes_each_running_tasks_deliver_overlapping_batches_exactly_once(
    race_factory, tmp_path, long_form, report
):
    unique, duplicates = (1000, 300) if long_form else (50, 10)
    options = {"ledger_path": str(tmp_path / "ledger.sqlite3"), "scenario": "async-procs", "tasks": 4}
    assert unique > options["tasks"] * BATCH_SIZE, "a process held at its first body could hold every record"
    records = batch_with_duplicates(unique, duplicates, seed=22)
    ctx = multiprocessing.get_context("spawn")
    results, first_body = ctx.Queue(), ctx.Barrier(2)
    procs = [
        ctx.Process(
            target=_process_worker, args=(race_factory, records, first_body, results, {**options, "worker": f"p{p}"})
        )
        for p in range(2)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    errors = [o for _, o in outcomes if not isinstance(o, Tally)]
    assert not errors, errors
    tally = Tally()
    for _, worker_tally in outcomes:
        tally.merge(worker_tally)
    assert tally.errors["BrokenBarrierError"] == 0, "a process waited for the other's first body in vain"
    workers = {worker[:2] for _, worker in Ledger(options["ledger_path"]).entries("async-procs")}
    assert workers == {"p0", "p1"}, "one process did all the work: the processes never raced"
    check_every_effect_once(
        race_factory, records, tally, ledger_path=options["ledger_path"], scenario="async-procs", report=report
    )


# -- 3. cancellation never commits a body that did not finish ----------------------------------------------


def check_effect_iff_complete(store: Any, ledger: Ledger, scenario: str, records: list[dict[str, Any]]) -> int:
    """Each record either ran its effect once and is COMPLETE, or never ran it and has no record at all (no lock
    left behind); returns how many ran."""
    counts = effects(ledger, scenario)
    wrong = {}
    for record in records:
        stored, ran = store.get(key_of(record, CONFIG)), counts[record["messageId"]]
        state = None if stored is None else stored.status
        if (ran, state) not in {(1, RecordStatus.COMPLETE), (0, None)}:
            wrong[record["messageId"]] = (ran, state)
    assert not wrong, f"(effects, stored status) other than (1, COMPLETE) or (0, absent): {wrong}"
    return sum(counts[r["messageId"]] for r in records)


@dataclass
class BodyLog:
    """Which bodies started and which finished (returned), in one invocation."""

    started: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    stuck_started: asyncio.Event = field(default_factory=asyncio.Event)


async def guarded_effect(
    record, store, ledger: Ledger, *, scenario: str, delay: float, log: BodyLog | None = None
) -> str:
    """A guard whose body awaits ``delay`` (a downstream call), then performs its effect: returns "ran", or
    "replayed" for a replay of this record's own result."""
    log = log or BodyLog()
    try:
        async with IdempotencyGuard(record, store=store, config=CONFIG) as guard:
            log.started.add(record["messageId"])
            await asyncio.sleep(delay)
            ledger.record(scenario, record["messageId"], "ran")
            log.finished.add(record["messageId"])
            guard.result = record["messageId"]
    except AlreadyProcessed as done:
        return "replayed" if done.response == record["messageId"] else f"replayed {done.response!r}"
    return "ran"


async def within(limit: str, seconds: float, call) -> Any:
    """Await ``call`` under ``asyncio.timeout`` or ``asyncio.wait_for``."""
    if limit == "wait_for":
        return await asyncio.wait_for(call, seconds)
    async with asyncio.timeout(seconds):
        return await call


def unique_records(prefix: str, count: int) -> list[dict[str, Any]]:
    return [sqs_record(f"{prefix}-{i:04d}", {"order": i}) for i in range(count)]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(asyncio, "timeout"), reason="asyncio.timeout is Python 3.11+")
@pytest.mark.parametrize("limit", ["timeout", "wait_for"])
@pytest.mark.parametrize("race_factory", ONE_LOOP_STORES, indirect=True)
def test_a_timeout_around_the_guard_releases_the_record_and_a_redelivery_runs_it(
    race_factory, limit, tmp_path, long_form, report
):
    """Bodies awaiting 0..3T under a timeout T: one that timed out in its body left no record (a redelivery runs
    it); one that timed out while its commit was in flight is COMPLETE. Then everything is redelivered."""
    store, ledger, scenario = race_factory(), Ledger(str(tmp_path / "ledger.sqlite3")), "timeout"
    rounds, per_round = (20, 50) if long_form else (1, 20)
    limit_s = timeout_above_acquire(store, ledger, per_round)
    records, timed_out, in_body, in_commit = [], 0, 0, 0
    for n in range(rounds + 5):
        if n >= rounds and in_body > 0:  # on a slow machine, a round may cut no body: play another
            break
        batch, rng, log = unique_records(f"r{n}", per_round), random.Random(n), BodyLog()
        tried = [
            within(
                limit,
                limit_s,
                guarded_effect(r, store, ledger, scenario=scenario, delay=rng.uniform(0, 3 * limit_s), log=log),
            )
            for r in batch
        ]
        outcomes = await_all(tried)
        assert {type(o) for o in outcomes} <= {str, TimeoutError}, outcomes
        for record, outcome in zip(batch, outcomes, strict=True):
            message_id = record["messageId"]
            if isinstance(outcome, TimeoutError):
                timed_out += 1
                in_body += message_id in log.started - log.finished
                in_commit += message_id in log.finished
            if message_id in log.started - log.finished:  # cut while it awaited: released at once
                assert store.get(key_of(record, CONFIG)) is None
        check_effect_iff_complete(store, ledger, scenario, batch)
        records += batch
    assert in_body > 0, "no timeout fired while a body awaited"
    redelivered = await_all([guarded_effect(r, store, ledger, scenario=scenario, delay=0) for r in records])
    assert set(redelivered) <= {"ran", "replayed"}, redelivered
    assert redelivered.count("ran") == timed_out - in_commit
    assert check_effect_iff_complete(store, ledger, scenario, records) == len(records)
    report(
        records=len(records),
        deliveries=2 * len(records),
        duplicates=len(records),
        faults=f"{timed_out} timeouts ({in_body} in the body, {in_commit} in the commit)",
        double_effects=assert_exactly_once(ledger, scenario, {r["messageId"] for r in records}),
        lost=assert_nothing_lost(store, {r["messageId"]: key_of(r, CONFIG) for r in records}, set()),
    )


def timeout_above_acquire(store, ledger: Ledger, concurrent: int) -> float:
    """A timeout that ``concurrent`` guards entered at once get past their acquire within, on this machine: from
    a warm-up round of as many bodies that await nothing (their records are another scenario's)."""
    warm_up = unique_records("warm-up", concurrent)
    started = time.perf_counter()
    assert set(await_all([guarded_effect(r, store, ledger, scenario="warm-up", delay=0) for r in warm_up])) == {"ran"}
    return max(0.15, 2 * (time.perf_counter() - started))


def await_all(calls) -> list[Any]:
    """Run the coroutines concurrently in a fresh loop; each one's result or exception."""

    async def gather() -> list[Any]:
        return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(gather())


def effect_handler(ledger: Ledger, scenario: str, delay_of):
    """An ``async def`` record handler: awaits ``delay_of(message_id)`` s, then performs its effect."""

    async def handler(record: Any) -> str:
        await asyncio.sleep(delay_of(record.message_id))
        ledger.record(scenario, record.message_id, "ran")
        return record.message_id

    return handler


#: The deadline margin, and the time a FakeContext leaves before it: more than any run takes, so the deadline
#: timer fires only when the test moves the loop's clock past it (``advance_when``).
MARGIN_MS, WINDOW_MS = 1000, 120_000


def later(seconds: float):
    """A clock ``seconds`` ahead of this one: time travel instead of sleeping past a lock deadline."""
    return lambda: time.time() + seconds


#: What each ending of a record cut short by the deadline leaves: (effects, stored status).
DEADLINE_LEAVES = {
    Outcome.PROCESSED: (1, RecordStatus.COMPLETE),
    Outcome.FAILED: (0, RecordStatus.IN_PROGRESS),  # cut while it ran: its lock is left to expire
    Outcome.DEFERRED: (0, None),  # never started
}


def check_deadline_outcomes(store: Any, ledger: Ledger, scenario: str, items: list[Any]) -> collections.Counter[str]:
    """Each record's effect and stored state are what its outcome says (``DEADLINE_LEAVES``); a record cut
    while it ran failed with a TimeoutError. Returns the outcomes."""
    counts = effects(ledger, scenario)
    for item in items:
        assert item.outcome in DEADLINE_LEAVES, (item.item_id, item.outcome, item.error)
        stored = store.get(key_of(item.raw, CONFIG))
        state = (counts[item.item_id], None if stored is None else stored.status)
        assert state == DEADLINE_LEAVES[item.outcome], (item.item_id, item.outcome, state)
        if item.outcome is Outcome.FAILED:
            assert isinstance(item.error, TimeoutError), item.error
    return collections.Counter(item.outcome.value for item in items)


@pytest.mark.slow
@pytest.mark.parametrize("max_concurrency", [90, 4])
@pytest.mark.parametrize("race_factory", ONE_LOOP_STORES, indirect=True)
def test_the_processor_deadline_fails_slow_bodies_uncommitted_and_commits_the_rest(
    race_factory, max_concurrency, tmp_path, long_form, report
):
    """Every third body outlives the time left before the deadline margin: each one that started is reported
    failed with a TimeoutError, not COMPLETE, its lock left to expire; with a worker for each record every other
    record committed; with 4 workers held up by slow bodies, records never started are deferred. A redelivery
    before the lock deadline runs the deferred ones and finds the cut ones in progress; one after it runs them."""
    store, ledger, scenario = race_factory(), Ledger(str(tmp_path / "ledger.sqlite3")), "deadline"
    records = unique_records("d", 90 if long_form else 24)
    slow = {r["messageId"] for r in records[::3]}
    processor = AsyncBatchProcessor(
        EventType.SQS,
        store=store,
        config=CONFIG,
        max_concurrency=max_concurrency,
        deadline_margin_ms=MARGIN_MS,
        raise_on_entire_batch_failure=False,
    )
    started_slow: list[str] = []

    def delay(message_id: str) -> float:
        if message_id not in slow:
            return 0.001
        started_slow.append(message_id)
        return 3600  # past any move of the clock: only the deadline ends it

    # The deadline fires once every worker holds a slow body: with a worker for each record, once every fast
    # record has committed too (each of the 4 workers committed its fast records before it took a slow one).
    checker = race_factory()
    fast_keys = [key_of(r, CONFIG) for r in records if r["messageId"] not in slow]

    def held_up() -> bool:
        if len(started_slow) < min(max_concurrency, len(slow)):
            return False
        stored = [checker.get(key) for key in fast_keys] if max_concurrency >= len(records) else []
        return all(r is not None and r.status is RecordStatus.COMPLETE for r in stored)

    async def run() -> dict[str, Any]:
        context = FakeContext(remaining_ms=MARGIN_MS + WINDOW_MS)
        handler = effect_handler(ledger, scenario, delay)
        mover = asyncio.ensure_future(advance_when(held_up, WINDOW_MS / 1000))
        try:
            return await async_process_partial_response(sqs_event(*records), handler, processor, context)
        finally:
            mover.cancel()

    failed = failed_ids(run_stepped(run()))
    Tally().add(processor.items, failed)
    first = check_deadline_outcomes(store, ledger, scenario, processor.items)
    assert slow <= failed
    if max_concurrency >= len(records):
        assert failed == slow, "a fast record failed although a worker was free for it"
        assert first == {"processed": len(records) - len(slow), "failed": len(slow)}
    else:
        assert first["deferred"] > 0

    redelivery = [r for r in records if r["messageId"] in failed]
    fast = effect_handler(ledger, scenario, lambda _: 0.001)
    early = failed_ids(asyncio.run(async_process_partial_response(sqs_event(*redelivery), fast, processor)))
    assert early == {i.item_id for i in processor.items if i.outcome is Outcome.IN_PROGRESS}
    assert len(early) == first["failed"]  # the cut ones, still locked; the deferred ones ran
    # Past the lock deadline (Lambda deadline + lock_grace_ms), well within the committed records' expiry.
    late = AsyncBatchProcessor(
        EventType.SQS, store=store, config=CONFIG, clock=later((MARGIN_MS + WINDOW_MS) / 1000 + 60)
    )
    assert failed_ids(asyncio.run(async_process_partial_response(sqs_event(*redelivery), fast, late))) == set()
    assert check_effect_iff_complete(store, ledger, scenario, records) == len(records)
    report(
        records=len(records),
        deliveries=len(records) + 2 * len(redelivery),
        duplicates=2 * len(redelivery),
        faults=f"{first['failed']} cut at the deadline, {first['deferred']} deferred",
        double_effects=assert_exactly_once(ledger, scenario, {r["messageId"] for r in records}),
        lost=assert_nothing_lost(store, {r["messageId"]: key_of(r, CONFIG) for r in records}, set()),
    )


def logged_handler(ledger: Ledger, scenario: str, log: BodyLog, rng: random.Random, stuck: set[str]):
    """Awaits up to 20 ms (forever for ``stuck`` records), performs its effect, and logs both ends."""

    async def handler(record: Any) -> str:
        log.started.add(record.message_id)
        if record.message_id in stuck:
            log.stuck_started.set()
        await asyncio.sleep(3600 if record.message_id in stuck else rng.uniform(0, 0.02))
        ledger.record(scenario, record.message_id, "ran")
        log.finished.add(record.message_id)
        return record.message_id

    return handler


async def cancel_while_running(event, handler, processor, log: BodyLog, after: float) -> None:
    """Start the invocation, cancel its task ``after`` s after the stuck body started: it must raise
    CancelledError."""
    task = asyncio.ensure_future(async_process_partial_response(event, handler, processor))
    await log.stuck_started.wait()
    await asyncio.sleep(after)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ONE_LOOP_STORES, indirect=True)
def test_an_invocation_cancelled_from_outside_commits_no_interrupted_body_and_holds_no_lock(
    race_factory, tmp_path, long_form, report
):
    """Cancelled at a random moment, with some bodies done, some awaiting and some not started: CancelledError
    propagates; an interrupted body's record is absent (released), a finished one's COMPLETE; no lock is left.
    A redelivery then runs every record that did not commit, once."""
    store, ledger, scenario = race_factory(), Ledger(str(tmp_path / "ledger.sqlite3")), "cancelled"
    rounds, per_round = (30, 40) if long_form else (2, 24)
    processor = new_processor(store, max_concurrency=8)
    records, interrupted = [], 0
    for n in range(rounds):
        rng, log = random.Random(n), BodyLog()
        batch = unique_records(f"c{n}", per_round)
        stuck = {batch[rng.randrange(per_round // 4)]["messageId"]}  # one body is always in flight
        handler = logged_handler(ledger, scenario, log, rng, stuck)
        asyncio.run(cancel_while_running(sqs_event(*batch), handler, processor, log, rng.uniform(0, 0.03)))
        assert stuck <= log.started - log.finished
        for message_id in log.started - log.finished:
            assert store.get(key_of(sqs_record(message_id, None), CONFIG)) is None, (
                f"{message_id}: interrupted, not released"
            )
        for message_id in log.finished:
            assert store.get(key_of(sqs_record(message_id, None), CONFIG)).status is RecordStatus.COMPLETE
        check_effect_iff_complete(store, ledger, scenario, batch)
        interrupted += len(log.started - log.finished)
        records += batch
    tally = Tally()
    handler = effect_handler(ledger, scenario, lambda _: 0.001)
    asyncio.run(deliver_until_done(processor, records, handler, tally))
    assert check_effect_iff_complete(store, ledger, scenario, records) == len(records)
    report(
        records=len(records),
        deliveries=len(records) + tally.deliveries,
        duplicates=tally.deliveries,
        faults=f"{rounds} invocations cancelled, {interrupted} bodies interrupted",
        double_effects=assert_exactly_once(ledger, scenario, {r["messageId"] for r in records}),
        lost=assert_nothing_lost(store, {r["messageId"]: key_of(r, CONFIG) for r in records}, set()),
    )


class LatentStore:
    """A sync store whose ``slow`` call (``acquire`` or ``complete``) calls ``in_flight(key)`` in its thread, and
    waits for it to return, before (``when="before"``: the write has not landed yet) or after (``"after"``:
    landed, answer on its way) the real call. The async face runs it in a ThreadedStore, as SQLite and DynamoDB
    are run."""

    def __init__(self, inner: Any, slow: str, when: str) -> None:
        self.inner, self.slow, self.when = inner, slow, when
        self.in_flight: Callable[[str], None] = lambda key: None
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def _call(self, name: str, key: str, call: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            self.calls[name] += 1
        if name != self.slow:
            return call(*args)
        if self.when == "before":
            self.in_flight(key)
            return call(*args)
        result = call(*args)
        self.in_flight(key)
        return result

    def acquire(self, record, now_ms):
        return self._call("acquire", record.key, self.inner.acquire, record, now_ms)

    def complete(self, record):
        return self._call("complete", record.key, self.inner.complete, record)

    def release(self, record):
        return self._call("release", record.key, self.inner.release, record)

    def get(self, key):
        return self.inner.get(key)


async def cancel_in_store_calls(store: LatentStore, ledger: Ledger, records: list[dict[str, Any]]) -> list[Any]:
    """Each record's guard in its own task, cancelled (from the store's thread, through the loop) while its slow
    store call is in flight: the call goes on only once the loop has cancelled the task."""
    loop = asyncio.get_running_loop()
    tasks = {
        key_of(r, CONFIG): asyncio.ensure_future(guarded_effect(r, store, ledger, scenario="in-flight", delay=0))
        for r in records
    }

    def cancel(key: str) -> None:
        cancelled = threading.Event()
        loop.call_soon_threadsafe(lambda: (tasks[key].cancel(), cancelled.set()))
        assert cancelled.wait(60), "the loop never cancelled the task"

    store.in_flight = cancel
    return await asyncio.gather(*tasks.values(), return_exceptions=True)


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["acquire-before", "acquire-after", "complete-before", "complete-after"])
@pytest.mark.parametrize("race_factory", STORES, indirect=True)
def test_a_cancellation_during_a_threaded_store_call_leaves_no_unused_lock_and_loses_no_commit(
    race_factory, phase, tmp_path, long_form, report
):
    """Cancelled while acquiring: the body never runs and the lock taken is released. Cancelled while
    committing: the commit lands. Either way the task ends cancelled, and a redelivery runs (or replays) each
    record so that its effect happened once."""
    (slow, when), inner, ledger = phase.split("-"), race_factory(), Ledger(str(tmp_path / "ledger.sqlite3"))
    store = LatentStore(inner, slow, when)
    records = unique_records(phase, 48 if long_form else 8)
    outcomes = asyncio.run(cancel_in_store_calls(store, ledger, records))
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes), outcomes
    ran = check_effect_iff_complete(inner, ledger, "in-flight", records)
    if slow == "acquire":
        assert ran == 0
        assert store.calls["release"] == len(records), "a lock taken by a cancelled acquire was never released"
    else:
        assert ran == len(records)
        assert store.calls["release"] == 0
    again = await_all([guarded_effect(r, inner, ledger, scenario="in-flight", delay=0) for r in records])
    assert again == ["ran" if slow == "acquire" else "replayed"] * len(records)
    assert check_effect_iff_complete(inner, ledger, "in-flight", records) == len(records)
    report(
        records=len(records),
        deliveries=2 * len(records),
        duplicates=len(records),
        faults=f"{len(records)} cancelled in {slow} ({when} the write)",
        double_effects=assert_exactly_once(ledger, "in-flight", {r["messageId"] for r in records}),
        lost=assert_nothing_lost(inner, {r["messageId"]: key_of(r, CONFIG) for r in records}, set()),
    )


# -- a store built for each invocation ---------------------------------------------------------------------


def store_threads() -> set[threading.Thread]:
    """The live threads of every ThreadedStore pool."""
    return {t for t in threading.enumerate() if t.name.startswith("idempotent-consumer-store")}


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ["sqlite"], indirect=True)  # any store run in threads: DynamoDB alike
def test_stores_built_for_each_invocation_leave_no_store_threads_behind(race_factory, tmp_path):
    """A handler that builds its store in each invocation (as many do): once those stores are gone, their thread
    pools are too, so a long-lived container does not gather idle threads invocation after invocation."""
    before = store_threads()
    handler = effect_handler(Ledger(str(tmp_path / "ledger.sqlite3")), "per-invocation", lambda _: 0)
    for n in range(20):
        processor = new_processor(race_factory(), max_concurrency=2)
        event = sqs_event(sqs_record(f"inv-{n}-a", n), sqs_record(f"inv-{n}-b", n))
        assert failed_ids(asyncio.run(async_process_partial_response(event, handler, processor))) == set()
    del processor
    gc.collect()
    left, waited_until = store_threads() - before, time.monotonic() + 60  # a bound no loaded machine reaches
    for thread in left:  # a collected pool's threads end as soon as they see it gone
        thread.join(timeout=max(0, waited_until - time.monotonic()))
    assert [t.name for t in left if t.is_alive()] == []
