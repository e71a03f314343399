"""One invocation's run over a batch with asyncio: the sync run's rules, records as tasks, and the deadline.

The scheduling rules (ordering groups, what is skipped or deferred, FIFO and stream failure rules) are
:class:`~consumer.batch._run.BatchRun`'s own; this module adds only how records are started (worker tasks
taking groups in batch order, at most ``max_concurrency`` of them, a new one called in only once a record
suspends) and one thing a thread cannot do: at the deadline margin, the bodies still running are cancelled and
reported failed, their locks left to expire, and the invocation returns its partial response instead of timing
out.
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING, Any

from consumer._async import settle
from consumer._errors import IdempotencyAlreadyInProgressError
from consumer._handlers import NO_GUARD
from consumer.batch._holders import BatchHolders, Waited, await_holder
from consumer.batch._run import BatchRun
from consumer.observability import Item, Outcome
from persistence import InlineStore, as_async_store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from consumer._context import LambdaContext
    from consumer.batch._run import RunSettings
    from consumer.guard import IdempotencyGuard
    from persistence import AsyncPersistenceLayer


class AsyncBatchRun(BatchRun):
    """Runs the items of one batch as asyncio tasks, at most ``settings.max_workers`` records at once."""

    __slots__ = (
        "_aborting",
        "_deadline_cancels",
        "_hiring",
        "_in_flight",
        "_inline",
        "_queue",
        "_store",
        "_workers",
        "cancel_at_deadline",
    )

    def __init__(
        self,
        settings: RunSettings,
        handler: Callable[..., Any],
        guard_passing: str,
        context: LambdaContext | None,
        items: list[Item],
    ) -> None:
        """A run over ``items``, not started (see :class:`~consumer.batch._run.BatchRun`)."""
        super().__init__(settings, handler, guard_passing, context, items)
        self.cancel_at_deadline = True
        self._aborting = False
        self._deadline_cancels: set[asyncio.Task[Any]] = set()
        self._in_flight: dict[int, IdempotencyGuard] = {}  # by worker number
        self._store: AsyncPersistenceLayer | None = None
        self._inline = False
        self._queue: collections.deque[list[Item]] = collections.deque()
        self._workers: list[asyncio.Task[None]] = []
        self._hiring = False

    async def arun(self) -> None:
        """Run every item; records sharing an ordering key run one after another, in order.

        With ``max_workers`` 1 the records run in batch order, as the sync processor runs them.
        """
        if not self.items:
            return
        if self.settings.store is not None and self._own is None:
            self._store = as_async_store(self.settings.store)  # once per batch, not per record
        # Given an InlineStore itself, the guard's store is async: its sync face would refuse every record.
        self._inline = self._store is None or (
            isinstance(self._store, InlineStore) and self._store is not self.settings.store
        )
        self._queue = collections.deque([self.items] if self.settings.max_workers == 1 else self.groups())
        self._unstarted = len(self._queue)
        workers = self._workers
        self._hire()  # the first worker; it calls in the others as soon as a record suspends
        timer = self._deadline_timer(workers)
        try:
            await self._all_finished(workers)
        finally:
            if timer is not None:
                timer.cancel()
        self._settle_unreached()
        # A BaseException of a handler fails the invocation (KeyboardInterrupt and SystemExit never get here:
        # asyncio lets them out of the loop at once).
        for worker in workers:
            if not worker.cancelled() and worker.exception() is not None:
                raise worker.exception()  # type: ignore[misc]  # checked just above

    def propagating(self, error: BaseException) -> BaseException:
        """What leaves the event loop when ``error`` ended :meth:`arun`: the ``KeyboardInterrupt`` or ``SystemExit``
        of a record, which asyncio lets out of the loop at once (the run is then cancelled), else ``error``."""  # noqa: D205, D209 - one sentence
        if isinstance(error, asyncio.CancelledError):
            for worker in self._workers:
                raised = None if not worker.done() or worker.cancelled() else worker.exception()
                if isinstance(raised, (KeyboardInterrupt, SystemExit)):
                    return raised
        return error

    async def _all_finished(self, workers: list[asyncio.Task[None]]) -> None:
        try:
            while not all(worker.done() for worker in workers):  # the list grows while we wait
                await asyncio.wait(list(workers))
        except asyncio.CancelledError:
            # The invocation itself is cancelled: every record still running releases its lock before it ends.
            self._aborting = True
            for worker in workers:
                worker.cancel()
            await settle(asyncio.wait(workers))
            raise

    def _hire(self) -> None:
        """Start workers for the groups waiting, up to ``max_workers`` (the first one: just one)."""
        self._hiring = False
        wanted = 1 if not self._workers else len(self._queue)
        while wanted > 0 and len(self._workers) < self.settings.max_workers and not self._aborting:
            number = len(self._workers)
            if number == 1:
                self._run_at_once()
            self._workers.append(asyncio.ensure_future(self._work(number)))
            wanted -= 1

    def _run_at_once(self) -> None:
        """A second worker starts: from now on records run at once, and may meet each other's locks.

        Until now one worker ran the records one after another: none could meet the lock of another record in
        flight, and none was tracked (:mod:`consumer.batch._holders`). The one in flight now, which suspended (that
        is what calls a second worker in), is tracked from here on as a try still entering its guard (wherever it
        is: a record meeting a lock on its key waits for it to end, then tries again); whether a lock it meets was
        met by its enter or in its body, its own task knows (:meth:`_aguarded`).
        """
        self._holders = holders = BatchHolders(asyncio.Event)
        guard = self._in_flight.get(0)
        if guard is not None and not self._workers[0].done():
            holders.begin(guard)

    async def _work(self, number: int) -> None:
        queue = self._queue
        # Busy for its whole life: between two groups it never suspends, so no other task sees it idle.
        self._busy += 1
        try:
            while queue:
                if not self._hiring and len(self._workers) < self.settings.max_workers:
                    # Runs on the loop's next turn, which comes only once this worker's record suspends: records
                    # that never suspend are all run by one worker, with no task per record to pay for.
                    self._hiring = True
                    asyncio.get_running_loop().call_soon(self._hire)
                group = queue.popleft()
                self._unstarted -= 1
                for item in group:
                    await self._arun_item(item, number)
        finally:
            self._busy -= 1

    async def _arun_item(self, item: Item, number: int) -> None:
        retried: set[str] | None = None  # the leases of this batch's records it tried again after (on a conflict)
        while True:  # checked again before a retry: the batch may have stopped meanwhile
            may_start, left = self._may_start(item)
            if not may_start:
                return
            try:
                guard = self._in_flight[number] = self._guard(item, left)
            except Exception as e:  # noqa: BLE001 - e.g. a serializer the function's annotation cannot name
                self._failed(item, e, None)
                return
            conflict = None
            try:
                conflict = await self._aguarded(item, guard)
                if conflict is None:
                    self._succeeded(item, guard)
                    return
                on = self._wait_on(conflict, guard)
                retried = set() if retried is None else retried
                waited = on if isinstance(on, Waited) else await await_holder(*on, conflict, retried)
            except Exception as e:  # noqa: BLE001 - any failure of one record is reported, never raised
                self._failed(item, e, guard)
                return
            except asyncio.CancelledError as e:
                self._cancelled(item, guard, e, waiting_on=conflict)
                return
            if not self._waited(item, conflict, guard, waited):
                return

    async def _aguarded(self, item: Item, guard: IdempotencyGuard) -> IdempotencyAlreadyInProgressError | None:
        """:meth:`_guarded` as a task: run ``item``'s handler in ``guard``, or return the lock its enter met.

        The lock is returned when records of the batch run at once (or came to since the try began, see
        :meth:`_run_at_once`): the holder may be one of them. A lock met in the body (a nested guard's) fails it.
        """
        if self._holders is not None:
            self._holders.begin(guard)
        entered = False
        try:
            if self._own is None and self._inline and guard.config.powertools_cutover is None:
                # A store called on the loop (or none): the guard's sync face, all its async one does. Not with a
                # cut-over: its read of the Powertools table is network I/O, which the async face runs in a thread.
                with guard:
                    entered = True
                    await self._abody(item, guard)
            else:  # an @idempotent_function's guard on its own store picks its own face
                if self._own is None:
                    guard._astore = self._store  # noqa: SLF001 - resolved once for the batch, not once per record
                async with guard:
                    entered = True
                    await self._abody(item, guard)
        except IdempotencyAlreadyInProgressError as e:
            if entered or self._holders is None:
                raise
            return e
        finally:  # however the try ends, whoever waits on the record wakes
            if self._holders is not None:
                self._holders.end(guard)
        return None

    async def _abody(self, item: Item, guard: IdempotencyGuard) -> None:
        """:meth:`_run_body` as a task: what an ``async def`` handler (or a plain one) returns is awaited first."""
        if self._holders is not None:
            self._holders.hold(guard)  # entered: records of the batch meeting its lock now wait for it
        record = self._input(item)
        result = self.handler(record) if self.guard_passing == NO_GUARD else self._call(record, guard)
        if hasattr(type(result), "__await__"):  # a plain def may return an awaitable too
            result = await result
        if result is not None or guard.result is None:  # a handler may set guard.result and return None
            guard.result = result

    def _cancelled(
        self,
        item: Item,
        guard: IdempotencyGuard,
        cancelled: asyncio.CancelledError,
        waiting_on: IdempotencyAlreadyInProgressError | None = None,
    ) -> None:
        """A record's body was cancelled by the deadline timer, or raised ``CancelledError`` itself.

        Or, with ``waiting_on``, the record was waiting for a lock of its batch and its body had not started: cut
        by the deadline timer, it is deferred, as a wait that runs out of time is.
        """
        item.key, item.release_error = guard.key, guard.release_error
        task = asyncio.current_task()
        if self._aborting or (task not in self._deadline_cancels and _cancelling(task)):
            raise cancelled  # the invocation is being cancelled (or its loop shut down): not one record's failure
        if task not in self._deadline_cancels:
            self._fail(item, Outcome.FAILED, cancelled)
            return
        self._deadline_cancels.discard(task)
        if hasattr(task, "uncancel"):  # Python 3.11+: the task carries on with the records after it
            task.uncancel()
        if guard.committed:  # the timer fired while the commit was in flight, and it landed
            self._succeeded(item, guard)
            return
        if waiting_on is not None:
            self._fail(item, Outcome.DEFERRED, waiting_on)
            return
        error = TimeoutError(
            f"record {item.item_id} was cancelled: less than {self.settings.deadline_margin_ms} ms were left "
            "before the Lambda deadline (its lock is left to expire; it is redelivered)"
        )
        error.__cause__ = cancelled
        self._fail(item, Outcome.FAILED, error)

    def _deadline_timer(self, workers: list[asyncio.Task[None]]) -> asyncio.TimerHandle | None:
        if self._remaining is None or not self.cancel_at_deadline:
            return None
        left_ms = self._remaining() - self.settings.deadline_margin_ms
        return asyncio.get_running_loop().call_later(max(0, left_ms) / 1000, self._deadline, workers)

    def _deadline(self, workers: Iterable[asyncio.Task[None]]) -> None:
        self._remaining = _no_time_left  # the timer fired: no record starts, whatever the context's clock says
        abandoned = False
        for number, worker in enumerate(workers):
            if not worker.done():
                guard = self._in_flight.get(number)
                if guard is not None:
                    # Work the body handed to a thread (asyncio.to_thread, run_in_executor) is not stopped by a
                    # cancellation: a released lock would let a redelivery run it again while it still runs.
                    guard.release_on_failure = False
                    abandoned = True
                self._deadline_cancels.add(worker)
                worker.cancel()
        if abandoned:
            # asyncio.run joins the loop's default executor before it returns, so a thread still running there
            # would hold the partial response past the Lambda timeout. The loop gets a fresh executor; the old
            # one, no longer the loop's, lets its threads finish on their own (or freeze with the process).
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - only at a deadline

            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix="asyncio"))

    def _settle_unreached(self) -> None:
        # A worker cancelled by the deadline between two records never reached the rest of its groups.
        for item in self.items:
            if item.outcome is None:
                self._fail(item, Outcome.DEFERRED, None)


def _no_time_left() -> int:
    """The time left once the deadline timer fired, in milliseconds: less than any margin."""
    return -1


def _cancelling(task: asyncio.Task[Any] | None) -> bool:
    """Whether someone asked ``task`` to cancel (Python 3.11+ can tell; before it, only our own flags can)."""
    cancelling = getattr(task, "cancelling", None)
    return cancelling is not None and cancelling() > 0
