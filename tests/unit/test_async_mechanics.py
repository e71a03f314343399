"""The async face's own mechanics: how stores are reached, cancellation, concurrency bounds, the deadline."""

from __future__ import annotations

import asyncio
import threading

import pytest
from events import failures, sqs_event, sqs_record
from fakes import FakeContext, run_stepped

from consumer import (
    AlreadyProcessed,
    AsyncBatchProcessor,
    BatchProcessor,
    EventType,
    IdempotencyGuard,
    UnexpectedBatchTypeError,
    async_process_partial_response,
)
from persistence import (
    InlineStore,
    InMemoryPersistenceLayer,
    RecordStatus,
    SQLitePersistenceLayer,
    ThreadedStore,
    as_async_store,
    is_async_store,
)

KEYED = {"messageId": "m-1"}


class GatedStore:
    """A sync store whose chosen call waits, in its thread, until the test opens the gate."""

    def __init__(self, inner, gated: str) -> None:
        self.inner, self.gated = inner, gated
        self.entered, self.gate = threading.Event(), threading.Event()

    def _maybe_wait(self, name: str) -> None:
        if name == self.gated:
            self.entered.set()
            assert self.gate.wait(10), "the test never opened the gate"

    def acquire(self, record, now_ms):
        self._maybe_wait("acquire")
        return self.inner.acquire(record, now_ms)

    def complete(self, record):
        self._maybe_wait("complete")
        self.inner.complete(record)

    def release(self, record):
        self._maybe_wait("release")
        self.inner.release(record)

    def get(self, key):
        return self.inner.get(key)


class NativeAsyncStore:
    """A native async store over the in-memory one: awaited, never put in a thread."""

    def __init__(self) -> None:
        self.inner = InMemoryPersistenceLayer()
        self.calls: list[str] = []

    async def acquire(self, record, now_ms):
        self.calls.append("acquire")
        await asyncio.sleep(0)
        return self.inner.acquire(record, now_ms)

    async def complete(self, record):
        self.calls.append("complete")
        await asyncio.sleep(0)
        self.inner.complete(record)

    async def release(self, record):
        self.calls.append("release")
        await asyncio.sleep(0)
        self.inner.release(record)


# -- how a store is reached ------------------------------------------------------------------------------


def test_a_non_blocking_store_is_called_on_the_loop_and_a_blocking_one_in_threads(tmp_path):
    memory, sqlite = InMemoryPersistenceLayer(), SQLitePersistenceLayer(str(tmp_path / "s.db"))
    assert isinstance(as_async_store(memory), InlineStore)
    threaded = as_async_store(sqlite)
    assert isinstance(threaded, ThreadedStore)
    assert as_async_store(sqlite) is threaded  # one adapter (and one pool) per store
    native = NativeAsyncStore()
    assert as_async_store(native) is native
    assert is_async_store(native)
    assert not is_async_store(memory)


def test_reserving_threads_raises_the_bound_and_never_lowers_it(tmp_path):
    adapter = ThreadedStore(SQLitePersistenceLayer(str(tmp_path / "s.db")), max_threads=4)
    adapter.reserve(2)
    assert adapter.max_threads == 4
    adapter.reserve(100)
    assert adapter.max_threads == 100
    with pytest.raises(ValueError, match="at least 1"):
        ThreadedStore(adapter.store, max_threads=0)


def test_store_calls_of_a_blocking_store_run_off_the_event_loop(tmp_path):
    threads = []

    class Recording(SQLitePersistenceLayer):
        def acquire(self, record, now_ms):
            threads.append(threading.current_thread())
            return super().acquire(record, now_ms)

    async def run():
        async with IdempotencyGuard(KEYED, store=Recording(str(tmp_path / "s.db"))) as guard:
            guard.result = 1

    asyncio.run(run())
    assert threads
    assert threads[0] is not threading.main_thread()


def test_an_async_guard_on_a_store_that_never_waits_takes_no_turn_of_the_loop():
    # The in-memory store is called on the loop, as the sync face calls it: entering, committing, releasing and
    # replaying suspend nowhere, so a body that never suspends runs to its commit before any other task starts.
    store, turns = InMemoryPersistenceLayer(), []

    async def other_task():
        turns.append("another task ran")

    async def run():
        other = asyncio.ensure_future(other_task())  # runs at the loop's next turn
        async with IdempotencyGuard(KEYED, store=store) as guard:
            guard.result = "done"
        with pytest.raises(ValueError, match="declined"):
            async with IdempotencyGuard({"messageId": "m-2"}, store=store):
                raise ValueError("declined")
        with pytest.raises(AlreadyProcessed):
            async with IdempotencyGuard(KEYED, store=store):
                pytest.fail("the body ran twice")
        assert turns == []
        await other

    asyncio.run(run())
    assert [record.status for record in store.scan()] == [RecordStatus.COMPLETE]  # m-2 was released


def test_a_native_async_store_is_awaited_and_works_only_with_async_with():
    store = NativeAsyncStore()

    async def run():
        async with IdempotencyGuard(KEYED, store=store) as guard:
            guard.result = {"n": 1}
        with pytest.raises(AlreadyProcessed) as done:
            async with IdempotencyGuard(KEYED, store=store):
                pytest.fail("the body ran twice")
        return done.value.response

    assert asyncio.run(run()) == {"n": 1}
    assert store.calls == ["acquire", "complete", "acquire"]
    with pytest.raises(TypeError, match="async store: use `async with"), IdempotencyGuard(KEYED, store=store):
        pytest.fail("the body ran")
    with pytest.raises(TypeError, match=r"^NativeAsyncStore is an async store: use AsyncBatchProcessor"):
        BatchProcessor(EventType.SQS, store=store)


def test_the_async_processor_runs_on_a_native_async_store():
    store = NativeAsyncStore()
    processor = AsyncBatchProcessor(EventType.SQS, store=store)

    async def handler(record):
        return record.message_id

    event = sqs_event(sqs_record("a", 1), sqs_record("b", 2))
    assert failures(async_process_partial_response(event, handler, processor)) == []
    async_process_partial_response(event, handler, processor)
    assert (processor.summary.processed, processor.summary.replayed) == (0, 2)


# -- cancellation in the guard ---------------------------------------------------------------------------


async def _cancel_when(entered: threading.Event, task: asyncio.Task) -> None:
    assert await asyncio.to_thread(entered.wait, 10)
    task.cancel()


@pytest.mark.parametrize("call", ["acquire", "complete", "release"])
def test_a_cancellation_during_a_store_call_waits_for_its_answer(tmp_path, call):
    """Cancelled while acquiring: the lock taken is released and the body never runs. Cancelled while
    committing: the commit lands (the body ran). Cancelled while releasing: the release lands."""
    store = GatedStore(SQLitePersistenceLayer(str(tmp_path / "s.db")), call)
    ran = []

    async def guarded():
        async with IdempotencyGuard(KEYED, store=store) as guard:
            ran.append(guard.key)
            if call == "release":
                raise ValueError("the body failed")
            guard.result = "done"

    async def run():
        task = asyncio.ensure_future(guarded())
        canceller = asyncio.ensure_future(_cancel_when(store.entered, task))
        await canceller
        await asyncio.sleep(0.05)  # the task is now cancelled, waiting for the store's answer
        assert not task.done()
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    stored = [store.get(key) for key in ran] or [None]
    if call == "acquire":
        assert ran == []  # the body never ran
        assert list(store.inner.scan()) == []  # and the lock it took was released
    elif call == "complete":
        assert stored[0].status is RecordStatus.COMPLETE
    else:
        assert stored == [None]


class FailingCommitStore(NativeAsyncStore):
    """A native async store whose commit waits for the test, then fails with ``failure``."""

    def __init__(self, failure: BaseException) -> None:
        super().__init__()
        self.failure, self.entered, self.gate = failure, asyncio.Event(), asyncio.Event()

    async def complete(self, record):  # noqa: ARG002 - the contract's signature
        self.entered.set()
        await self.gate.wait()
        raise self.failure


@pytest.mark.parametrize(
    "failure", [ConnectionError("the store went away"), asyncio.CancelledError("the store's own")], ids=str
)
def test_a_cancellation_during_a_commit_that_fails_propagates_chained_to_the_stores_failure(failure):
    """The cancellation waits for the commit's answer; the commit failed, so the cancellation (the task's own,
    not one the store raised) propagates, chained to the store's error."""

    async def run():
        store = FailingCommitStore(failure)

        async def guarded():
            async with IdempotencyGuard(KEYED, store=store) as guard:
                guard.result = "done"

        task = asyncio.ensure_future(guarded())
        await store.entered.wait()
        task.cancel("the invocation ended")
        await asyncio.sleep(0)  # the task takes the cancellation while its commit waits
        store.gate.set()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        return caught.value

    cancelled = asyncio.run(run())
    assert cancelled.args == ("the invocation ended",)
    assert cancelled.__cause__ is (failure if isinstance(failure, ConnectionError) else None)


def test_a_body_cancelled_by_a_timeout_is_released_not_committed(tmp_path):
    store = SQLitePersistenceLayer(str(tmp_path / "s.db"))

    async def run():
        async with IdempotencyGuard(KEYED, store=store) as guard:
            guard.result = "never stored"
            await asyncio.sleep(10)

    async def with_timeout():
        await asyncio.wait_for(run(), 0.05)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(with_timeout())
    assert list(store.scan()) == []


# -- the processor ---------------------------------------------------------------------------------------


def _concurrency_probe():
    state = {"now": 0, "peak": 0, "order": []}

    async def handler(record):
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.001)
        state["order"].append(record.message_id)
        state["now"] -= 1

    return state, handler


@pytest.mark.parametrize("limit", [1, 3, 50])
def test_max_concurrency_bounds_the_records_running_at_once(limit):
    state, handler = _concurrency_probe()
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), max_concurrency=limit)
    event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(20)))
    async_process_partial_response(event, handler, processor)
    assert state["peak"] == min(limit, 20)
    if limit == 1:
        assert state["order"] == [f"m{i}" for i in range(20)]  # batch order, as the sync processor runs them


def test_a_plain_def_handler_and_one_returning_an_awaitable_both_work():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    event = sqs_event(sqs_record("a", 1))

    async def later(record):
        return {"later": record.message_id}

    async_process_partial_response(event, lambda record: {"now": record.message_id}, processor)
    assert processor.items[0].result == {"now": "a"}
    event = sqs_event(sqs_record("b", 1))
    async_process_partial_response(event, lambda record: later(record), processor)  # noqa: PLW0108
    assert processor.items[0].result == {"later": "b"}


def test_generator_handlers_are_refused_before_any_record_runs():
    store = InMemoryPersistenceLayer()

    async def agen(record):
        yield record

    with pytest.raises(TypeError, match="async generator function"):
        async_process_partial_response(
            sqs_event(sqs_record("a", 1)), agen, AsyncBatchProcessor(EventType.SQS, store=store)
        )
    assert list(store.scan()) == []
    with pytest.raises(ValueError, match="max_concurrency must be at least 1"):
        AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=0)


def test_bodies_running_at_the_deadline_margin_are_cancelled_and_reported_their_locks_left_to_expire():
    """A cancellation does not stop work the body handed to a thread: releasing would let a redelivery run it
    again while it still runs, so the lock is left to its deadline."""
    store = InMemoryPersistenceLayer()
    started = []

    async def handler(record):
        started.append(record.message_id)
        if record.message_id == "slow":  # the margin is reached while it runs, and only then
            asyncio.get_running_loop().advance(60)
            await asyncio.sleep(3600)

    processor = AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=1, deadline_margin_ms=1000)
    event = sqs_event(sqs_record("fast", 1), sqs_record("slow", 2), sqs_record("later", 3))
    context = FakeContext(remaining_ms=61_000)  # 60 s until the margin, by the loop's clock
    response = run_stepped(processor.process(event, handler, context))
    assert failures(response) == ["slow", "later"]
    assert started == ["fast", "slow"]
    slow, later = processor.items[1:]
    assert isinstance(slow.error, TimeoutError)
    assert "less than 1000 ms" in str(slow.error)
    assert isinstance(slow.error.__cause__, asyncio.CancelledError)
    assert later.outcome.value == "deferred"
    assert sorted(r.status.value for r in store.scan()) == ["COMPLETE", "IN_PROGRESS"]  # fast done, slow locked


def test_the_deadline_response_does_not_wait_for_thread_work_it_abandoned(tmp_path):
    """``asyncio.run`` joins its loop's default executor before it returns: a body's ``asyncio.to_thread`` still
    running at the deadline held the partial response until the thread ended, past the Lambda timeout. The response
    now comes back while the thread provably still runs; the record's lock stays, and the thread ending later
    commits nothing."""
    store = SQLitePersistenceLayer(str(tmp_path / "s.db"))
    inside, let_go, finished = threading.Event(), threading.Event(), threading.Event()

    def blocking_call():  # a body's thread work: a cancellation cannot stop it
        inside.set()
        let_go.wait(60)
        finished.set()
        return "finished after the deadline"

    async def handler(record):
        return await asyncio.to_thread(blocking_call)

    processor = AsyncBatchProcessor(
        EventType.SQS, store=store, deadline_margin_ms=1000, raise_on_entire_batch_failure=False
    )
    responses, errors = [], []

    def lambda_handler():  # docs/async.md's entry point, in its own thread so that the test can outwait it
        event, context = sqs_event(sqs_record("a", 1)), FakeContext(remaining_ms=2000)  # the margin in 1 s
        responses.append(async_process_partial_response(event, handler, processor, context))
        errors.append(processor.items[0].error)  # the summary of this thread's latest batch

    invocation = threading.Thread(target=lambda_handler)
    invocation.start()
    try:
        invocation.join(30)  # before the fix: not before let_go, which is set below
        assert responses == [{"batchItemFailures": [{"itemIdentifier": "a"}]}]
        assert inside.is_set()
        assert not finished.is_set()  # the thread is still in the body's work
    finally:
        let_go.set()
        invocation.join(60)
    assert finished.wait(30)
    (record,) = store.scan()
    assert record.status is RecordStatus.IN_PROGRESS  # left to expire: never released, never committed
    assert isinstance(errors[0], TimeoutError)


def test_without_cancel_at_deadline_a_running_body_finishes():
    async def handler(record):
        await asyncio.sleep(0.3)  # past the deadline, 100 ms in: started well before it, even on a loaded machine

    processor = AsyncBatchProcessor(
        EventType.SQS, store=InMemoryPersistenceLayer(), deadline_margin_ms=1000, cancel_at_deadline=False
    )
    response = async_process_partial_response(sqs_event(sqs_record("a", 1)), handler, processor, FakeContext(1100))
    assert failures(response) == []


def test_a_cancelled_invocation_releases_every_running_lock_and_propagates(tmp_path):
    store = SQLitePersistenceLayer(str(tmp_path / "s.db"))
    entered = asyncio.Event

    async def run():
        running = entered()

        async def handler(record):
            running.set()
            await asyncio.sleep(10)

        processor = AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=5)
        event = sqs_event(*(sqs_record(f"m{i}", i) for i in range(5)))
        task = asyncio.ensure_future(async_process_partial_response(event, handler, processor))
        await running.wait()
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert list(store.scan()) == []


def test_a_handler_raising_cancelled_error_itself_fails_only_its_record():
    async def handler(record):
        if record.message_id == "b":
            raise asyncio.CancelledError  # e.g. awaited a future someone else cancelled
        return 1

    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    event = sqs_event(sqs_record("a", 1), sqs_record("b", 2))
    assert failures(async_process_partial_response(event, handler, processor)) == ["b"]


class Halt(BaseException):
    """A BaseException asyncio treats like any other (unlike KeyboardInterrupt and SystemExit)."""


def test_a_base_exception_from_a_handler_fails_the_invocation_after_the_others_finish():
    store = InMemoryPersistenceLayer()
    finished = []

    async def handler(record):
        if record.message_id == "boom":
            raise Halt
        await asyncio.sleep(0.01)
        finished.append(record.message_id)

    processor = AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=4)
    event = sqs_event(sqs_record("boom", 0), *(sqs_record(f"m{i}", i) for i in range(3)))
    with pytest.raises(Halt):
        async_process_partial_response(event, handler, processor)
    assert sorted(finished) == ["m0", "m1", "m2"]  # nobody was still running when it was raised
    assert len([r for r in store.scan() if r.status is RecordStatus.COMPLETE]) == 3


def test_a_keyboard_interrupt_stops_the_loop_and_every_other_record_releases_its_lock(tmp_path):
    """asyncio lets KeyboardInterrupt out of the loop at once; asyncio.run then cancels the other records."""
    store = SQLitePersistenceLayer(str(tmp_path / "s.db"))
    ran, all_running = [], asyncio.Event()

    async def handler(record):
        ran.append(record.message_id)
        if len(ran) == 4:
            all_running.set()
        if record.message_id == "boom":
            await asyncio.wait_for(all_running.wait(), 30)  # every other record holds its lock
            raise KeyboardInterrupt
        await asyncio.sleep(60)

    processor = AsyncBatchProcessor(EventType.SQS, store=store, max_concurrency=4)
    event = sqs_event(sqs_record("boom", 0), *(sqs_record(f"m{i}", i) for i in range(3)))
    with pytest.raises(KeyboardInterrupt):
        async_process_partial_response(event, handler, processor)
    assert sorted(ran) == ["boom", "m0", "m1", "m2"]
    assert list(store.scan()) == []  # nothing COMPLETE, no lock left behind


# -- what a first review of the async paths found --------------------------------------------------------


def test_a_task_held_in_a_result_is_cancelled_when_the_record_fails():
    store, charges, held = InMemoryPersistenceLayer(), [], []

    async def charge(message_id):
        await asyncio.sleep(0.01)
        charges.append(message_id)

    async def handler(record):
        held.append(asyncio.ensure_future(charge(record.message_id)))
        return held[:]  # scheduled, returned, never awaited

    async def run():
        processor = AsyncBatchProcessor(EventType.SQS, store=store, raise_on_entire_batch_failure=False)
        response = await async_process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor)
        await asyncio.wait(held)  # cancelled, or left running to charge
        return response

    assert failures(asyncio.run(run())) == ["m-1"]
    assert [task.cancelled() for task in held] == [True]
    assert charges == []
    assert list(store.scan()) == []


def test_a_too_large_result_is_committed_without_it_even_when_cancelled_meanwhile(tmp_path):
    store = GatedStore(SQLitePersistenceLayer(str(tmp_path / "s.db")), "complete")

    async def guarded():
        async with IdempotencyGuard(KEYED, store=store) as guard:
            guard.result = "x" * 500_000

    async def run():
        task = asyncio.ensure_future(guarded())
        await _cancel_when(store.entered, task)
        store.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    (record,) = store.inner.scan()
    assert (record.status, record.response) == (RecordStatus.COMPLETE, None)


def test_a_commit_that_lands_after_the_deadline_fired_is_reported_processed(tmp_path):
    store = GatedStore(SQLitePersistenceLayer(str(tmp_path / "s.db")), "complete")

    async def handler(record):
        return 1

    async def run():
        # The deadline fires only when the loop's clock is moved past it (60 s before the margin): once the commit
        # was reached, which then waits until the deadline has passed.
        loop = asyncio.get_running_loop()
        processor = AsyncBatchProcessor(EventType.SQS, store=store, deadline_margin_ms=1000)
        task = asyncio.ensure_future(
            async_process_partial_response(sqs_event(sqs_record("m-1", 1)), handler, processor, FakeContext(61_000))
        )
        assert await asyncio.to_thread(store.entered.wait, 10)
        loop.advance(60)
        await asyncio.sleep(0.001)  # due after the deadline timer, which therefore fires first
        store.gate.set()
        return await task, processor

    response, processor = run_stepped(run())
    assert failures(response) == []
    assert processor.summary.processed == 1
    assert [r.status for r in store.inner.scan()] == [RecordStatus.COMPLETE]


def test_a_store_mixing_async_and_plain_methods_is_refused():
    class Mixed:
        def acquire(self, *_):
            return None

        async def complete(self, *_):
            return None

        async def release(self, *_):
            return None

    with pytest.raises(TypeError, match=r"mixes async and plain methods \(complete, release async\)"):
        as_async_store(Mixed())
    with pytest.raises(TypeError, match="mixes async and plain methods"), IdempotencyGuard(KEYED, store=Mixed()):
        pytest.fail("the body ran")


def test_an_empty_batch_is_refused_and_summarizes_nothing():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    with pytest.raises(UnexpectedBatchTypeError, match="'Records' list is empty"):
        async_process_partial_response({"Records": []}, lambda record: 1, processor)
    assert processor.summary is None


def test_threads_sharing_a_processor_each_read_their_own_summary_after_asyncio_run():
    processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
    both_done, seen = threading.Barrier(2), {}

    def invoke(size):
        event = sqs_event(*(sqs_record(f"{size}-{i}", i) for i in range(size)))
        async_process_partial_response(event, lambda record: 1, processor)
        both_done.wait(5)
        seen[size] = processor.summary.records

    threads = [threading.Thread(target=invoke, args=(size,)) for size in (2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {2: 2, 3: 3}


def test_importing_the_library_does_not_import_asyncio():
    """A sync consumer's cold start does not pay for asyncio (15 ms and more): the async run loads on first use."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = "import sys, consumer, persistence; print(sorted(m for m in ('asyncio', 'inspect') if m in sys.modules))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "asyncio" not in shown


def test_records_that_never_suspend_are_run_by_one_task_and_suspending_ones_by_many():
    """Workers are called in only once a record suspends, so a batch of CPU-only records pays for no task per
    record; records that wait on I/O still run up to max_concurrency at once."""
    tasks = {"instant": set(), "waiting": set()}
    alive = []

    async def instant(record):
        tasks["instant"].add(asyncio.current_task())
        alive.append(len(asyncio.all_tasks()))

    async def waiting(record):
        tasks["waiting"].add(asyncio.current_task())
        await asyncio.sleep(0.001)

    for name, handler in (("instant", instant), ("waiting", waiting)):
        processor = AsyncBatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer(), max_concurrency=50)
        event = sqs_event(*(sqs_record(f"{name}-{i}", i) for i in range(20)))
        assert failures(async_process_partial_response(event, handler, processor)) == []
        assert processor.summary.processed == 20
    assert len(tasks["instant"]) == 1
    assert max(alive) == 2  # the invocation's own task and one worker: no task started for nothing
    assert len(tasks["waiting"]) == 20
