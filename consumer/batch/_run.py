"""One invocation's run over a batch: scheduling, ordering, failure propagation, the deadline."""

from __future__ import annotations

import contextvars
import threading
import types
from typing import TYPE_CHECKING, Any

from consumer._errors import AlreadyProcessed, IdempotencyAlreadyInProgressError, IdempotencyKeyError
from consumer._handlers import LAMBDA_CONTEXT, NO_GUARD, OWN, POSITIONAL, guarded_function, handler_shape
from consumer._reports import idempotency_disabled
from consumer.batch._holders import BatchHolders, Waited, wait_deadline, wait_for_holder
from consumer.batch._record_model import parsed
from consumer.config import function_config
from consumer.guard import IdempotencyGuard
from consumer.observability import Item, Outcome
from consumer.sources import EventType
from persistence import InMemoryPersistenceLayer

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import ThreadPoolExecutor

    from consumer._context import Clock, LambdaContext
    from consumer._handlers import GuardedFunction
    from consumer.config import IdempotencyConfig
    from persistence import AsyncPersistenceLayer, PersistenceLayer


class RunSettings:
    """The processor's settings, as one run needs them (a plain slotted class: no code generated at import)."""

    __slots__ = (
        "clock",
        "config",
        "deadline_margin_ms",
        "event_type",
        "max_workers",
        "model",
        "skip_group_on_error",
        "stop_on_first_failure",
        "store",
    )

    def __init__(  # noqa: PLR0917 - one argument per setting, in order
        self,
        event_type: EventType,
        store: PersistenceLayer | AsyncPersistenceLayer | None,  # None: only @idempotent_function handlers are guarded
        config: IdempotencyConfig | None,
        clock: Clock,
        max_workers: int,
        deadline_margin_ms: int,
        stop_on_first_failure: bool,
        skip_group_on_error: bool,
        model: type[Any] | None = None,  # the handler gets each record parsed into it (a Pydantic model)
    ) -> None:
        """Keep the settings; they are not changed afterwards (:meth:`for_source` makes a copy)."""
        self.event_type = event_type
        self.store = store
        self.config = config
        self.clock = clock
        self.max_workers = max_workers
        self.deadline_margin_ms = deadline_margin_ms
        self.stop_on_first_failure = stop_on_first_failure
        self.skip_group_on_error = skip_group_on_error
        self.model = model

    def for_source(self, event_type: EventType) -> RunSettings:
        """These settings for the batch's own source (an SQS processor's FIFO queue, say)."""
        if event_type is self.event_type:
            return self
        return RunSettings(
            event_type,
            self.store,
            self.config,
            self.clock,
            self.max_workers,
            self.deadline_margin_ms,
            self.stop_on_first_failure,
            self.skip_group_on_error,
            self.model,
        )


#: The outcomes of a record that ran, by plain names for the per-record path: on Python 3.11 a member read off its
#: class (``Outcome.PROCESSED``) costs several times a global's read.
_PROCESSED, _UNGUARDED = Outcome.PROCESSED, Outcome.UNGUARDED
_SOURCE_NAMES = {event_type: event_type.value for event_type in EventType}

#: The pool whose worker the current thread is, if any: a batch run in it must not wait for a pool's workers.
_worker = threading.local()
#: A record's guard is made by ``__new__`` and an ``__init__`` call (see :meth:`BatchRun._guard`).
_new_guard = object.__new__
#: Stands in for the store of a processor that has none: its guards are pass-throughs and never reach it.
_NO_STORE = InMemoryPersistenceLayer()


class BatchRun:
    """Runs the items of one batch through their guards and records each outcome."""

    __slots__ = (
        "_busy",
        "_disabled",
        "_failed_groups",
        "_guard_config",
        "_holders",
        "_lock",
        "_own",
        "_own_call",
        "_own_context",
        "_remaining",
        "_stopped",
        "_unstarted",
        "context",
        "guard_passing",
        "handler",
        "items",
        "pool",
        "settings",
        "source",
    )

    def __init__(
        self,
        settings: RunSettings,
        handler: Callable[..., Any],
        guard_passing: str,
        context: LambdaContext | None,
        items: list[Item],
    ) -> None:
        """A run over ``items``, not started.

        An ``@idempotent_function`` record handler runs in its own guard, not in a second one of ours. A context
        without ``get_remaining_time_in_millis`` (a test's stand-in) knows no deadline: none is kept.
        """
        self.settings = settings
        self.handler = handler
        self.guard_passing = guard_passing
        self.context = context
        self.items = items
        self.pool: ThreadPoolExecutor | None = None
        self._disabled = idempotency_disabled()
        self.source: str = _SOURCE_NAMES[settings.event_type]  # the source's name (logs, summary); .value is a call
        self._stopped = False
        self._failed_groups: set[str] = set()
        self._lock = threading.Lock()
        self._own: GuardedFunction | None = None  # an @idempotent_function handler's guard
        self._own_context = False
        self._own_call: Callable[..., Any] | None = None  # the undecorated function (bound)
        self._remaining: Callable[[], int] | None = getattr(context, "get_remaining_time_in_millis", None)
        # The config of the records' guards on the processor's store: as a guard resolves it when given none
        # (IdempotencyGuard.__init__), once for the batch. Their context is the batch's own, even none: the records run
        # in the batch's registration of it, where a guard given none finds exactly that (never another invocation's).
        self._guard_config = settings.config or function_config()
        # Records of several groups run at once (threads, or tasks of a loop): they may meet each other's locks.
        self._holders: BatchHolders[Any] | None = None
        self._unstarted = 0  # groups not started yet
        self._busy = 0  # workers (threads, or tasks) running a group
        if guard_passing == OWN:
            self._own = own = guarded_function(handler)
            self._own_context = handler_shape(handler, async_ok=True).lambda_context
            bound_to = getattr(handler, "__self__", None)  # a decorated method, handed over bound
            call = own.function if own is not None else None
            self._own_call = call if bound_to is None or call is None else types.MethodType(call, bound_to)

    def run(self) -> None:
        """Run every item; records sharing an ordering key run one after another, in order.

        A batch processed inside a record run by a worker (a record holding a batch of its own) runs in that worker,
        one record after another: it would otherwise wait for workers of a pool that may all wait for it (its own
        processor's, or through another processor's records, the outer one's).
        """
        if self.pool is None or getattr(_worker, "pool", None) is not None:
            for item in self.items:
                self._run_item(item)
            return
        from concurrent.futures import wait  # noqa: PLC0415 - loaded with the pool (BatchProcessor._workers)

        self._holders = BatchHolders(threading.Event)  # records in threads may meet each other's locks
        groups = self.groups()
        self._unstarted = len(groups)
        futures = [self.pool.submit(contextvars.copy_context().run, self._run_group, g) for g in groups]
        # Every group finishes before anything is raised (a BaseException from a handler): no record may
        # still be running, and commit, after the invocation has ended.
        wait(futures)
        for future in futures:
            future.result()

    def groups(self) -> list[list[Item]]:
        """The items by ordering key, each group in batch order: what runs one after another."""
        # Records without an ordering key still share a worker with their own duplicates (same id), so a
        # duplicate replays after the first copy instead of failing on its lock.
        groups: dict[object, list[Item]] = {}
        for item in self.items:
            groups.setdefault(("id", item.item_id) if item.group is None else item.group, []).append(item)
        return list(groups.values())

    def _run_group(self, items: list[Item]) -> None:
        _worker.pool = self.pool  # this thread is the pool's for its whole life
        with self._lock:
            self._unstarted, self._busy = self._unstarted - 1, self._busy + 1
        try:
            for item in items:
                self._run_item(item)
        finally:
            with self._lock:
                self._busy -= 1

    def _may_start(self, item: Item) -> tuple[bool, int | None]:
        """Whether ``item`` may start now, and the remaining time read once for it (``None``: no deadline known).

        That one reading serves the deadline-margin check here and the lock deadline of the record's guard. A record
        that may not start is failed here, not run: later records of its group (or batch) must not overtake it.
        """
        left = None if self._remaining is None else self._remaining()
        # Read without the lock: a flag or a set member written by another group's worker may be seen a
        # record late either way; a group's own failure is written by the thread that reads it.
        if self._stopped or (item.group is not None and item.group in self._failed_groups):
            self._fail(item, Outcome.SKIPPED, None)
            return False, left
        # Exactly the margin left still starts the record: the margin is what a record may not go below.
        # Negative remaining time is below any margin: no clamp needed here.
        if left is not None and left < self.settings.deadline_margin_ms:
            self._fail(item, Outcome.DEFERRED, None)
            return False, left
        return True, left

    def _guard(self, item: Item, left: int | None = None) -> IdempotencyGuard:
        """``item``'s guard: the processor's store and config, or an ``@idempotent_function``'s own, or none.

        ``left``: the remaining time read for ``item``'s deadline-margin check, which its lock deadline derives from
        (``None``: the guard reads it).
        """
        s, own = self.settings, self._own
        if own is None and s.store is not None:  # the usual case: the processor's own store
            # The class's call would build a dict of the keywords (its __init__ is reached through C): not per record.
            guard = _new_guard(IdempotencyGuard)
            guard.__init__(
                item.raw, store=s.store, config=self._guard_config, context=self.context, clock=s.clock,
                disabled=self._disabled,
            )  # fmt: skip
            guard._remaining_ms = left  # noqa: SLF001 - read for the record's deadline-margin check: no second read
        elif own is not None:  # the function's own guard: the key it takes when called with the typed record
            guard = IdempotencyGuard(
                item.raw,
                store=own.store,
                config=own.config,
                context=self.context,
                clock=own.clock,
                key_prefix=own.key_prefix,
                disabled=self._disabled,
                output_serializer=own.output_serializer(),
            )
        else:  # a processor without a store: a pass-through, the record runs without idempotency
            guard = IdempotencyGuard(item.raw, store=_NO_STORE, context=self.context, disabled=True)
        guard._batch_record = (item.item_id, self.source)  # noqa: SLF001 - the processor logs it
        return guard

    def _run_item(self, item: Item) -> None:
        retried: set[str] | None = None  # the leases of this batch's records it tried again after (on a conflict)
        while True:  # checked again before a retry: the batch may have stopped meanwhile
            may_start, left = self._may_start(item)
            if not may_start:
                return
            g = None
            try:
                g = self._guard(item, left)
                conflict = self._guarded(item, g)
                if conflict is None:
                    self._succeeded(item, g)
                    return
                on = self._wait_on(conflict, g)
                retried = set() if retried is None else retried
                waited = on if isinstance(on, Waited) else wait_for_holder(*on, conflict, retried)
                if self._waited(item, conflict, g, waited):
                    continue  # the holder was a record of this batch, and it ended: try again
            except Exception as e:  # noqa: BLE001 - any failure of one record is reported, never raised
                self._failed(item, e, g)
            return

    def _guarded(self, item: Item, g: IdempotencyGuard) -> IdempotencyAlreadyInProgressError | None:
        """Run ``item``'s handler in ``g``; or return the lock ``g``'s enter met, when records run at once.

        Records of the batch that meet ``g``'s lock meanwhile know it is held by one of theirs.
        """
        holders = self._holders
        if holders is None:
            with g:
                self._run_body(item, g)
            return None
        with holders.trying(g) as attempt, g:
            holders.hold(g)  # entered: records of the batch meeting its lock now wait for it
            self._run_body(item, g)
        return attempt.conflict

    def _input(self, item: Item) -> Any:
        """What the handler is given: the typed record, or with a ``model`` the record parsed into it."""
        model = self.settings.model
        return item.record if model is None else parsed(model, self.settings.event_type, item)

    def _run_body(self, item: Item, g: IdempotencyGuard) -> None:
        record = self._input(item)
        result = self.handler(record) if self.guard_passing == NO_GUARD else self._call(record, g)
        if result is not None or g.result is None:  # a handler may set guard.result and return None
            g.result = result

    def _wait_on(
        self, conflict: IdempotencyAlreadyInProgressError, guard: IdempotencyGuard
    ) -> Waited | tuple[BatchHolders[Any], float | None]:
        """What a record that met ``conflict`` waits on: the batch's holders, and until when at most (until the
        deadline margin); or ``NO_SPARE_WORKER``, not to wait, when groups of this batch wait for a worker that no
        idle one will take (one started but not yet running a group takes one): a wait would hold them up."""  # noqa: D205, D209 - one sentence
        assert self._holders is not None  # noqa: S101 - a conflict is returned only when records run at once
        with self._lock:
            if self._unstarted > self.settings.max_workers - self._busy:
                return Waited.NO_SPARE_WORKER
        remaining = None if self._remaining is None else self._remaining() - self.settings.deadline_margin_ms
        return self._holders, wait_deadline(conflict, remaining, int(guard.clock() * 1000))

    def _waited(
        self, item: Item, conflict: IdempotencyAlreadyInProgressError, guard: IdempotencyGuard, waited: Waited
    ) -> bool:
        """Whether ``item`` tries its guard again: the lock it met was a record of this batch's, which ended since.

        Otherwise it failed (recorded here): another invocation's lock (in progress), or deferred: it waited for a
        record of its own batch until the deadline margin (with a Lambda context, the margin comes before the
        holder's lock deadline), and was not run for lack of time.
        """
        if waited is Waited.RETRY:
            return True
        if waited is Waited.OUT_OF_TIME and self._remaining is not None:
            item.key = guard.key
            self._fail(item, Outcome.DEFERRED, conflict)
        else:
            self._failed(item, conflict, guard)
        return False

    @staticmethod
    def _succeeded(item: Item, guard: IdempotencyGuard) -> None:
        item.result, item.key = guard.result, guard.key
        if guard.key is not None:
            item.outcome = _PROCESSED
            return
        item.outcome = _UNGUARDED
        why = guard._no_key()  # noqa: SLF001 - the record's guard, which the processor made
        if why is not None:  # no key selected (not idempotency disabled): the error not raised, as it was allowed
            item.error = IdempotencyKeyError(why)

    def _failed(self, item: Item, error: Exception, guard: IdempotencyGuard | None) -> None:
        if guard is not None:
            item.key, item.release_error = guard.key, guard.release_error
        if isinstance(error, AlreadyProcessed):  # from the record's own guard: a nested one's is a NestedReplayError
            item.outcome, item.result = Outcome.REPLAYED, error.response
        elif isinstance(error, IdempotencyAlreadyInProgressError):
            self._fail(item, Outcome.IN_PROGRESS, error)
        else:
            self._fail(item, Outcome.FAILED, error)

    def _call(self, record: Any, guard: IdempotencyGuard) -> Any:
        if self.guard_passing == POSITIONAL:
            return self.handler(record, guard)
        if self._own is None or self._own_call is None:
            return self.handler(record, guard=guard)
        kwargs: dict[str, Any] = {self._own.data_keyword_argument: record}  # as Powertools' processor calls it
        if self._own_context:
            kwargs[LAMBDA_CONTEXT] = self.context
        return self._own_call(**kwargs)

    def _fail(self, item: Item, outcome: Outcome, error: BaseException | None) -> None:
        item.outcome, item.error = outcome, error
        s = self.settings
        with self._lock:
            if item.group is not None:
                self._failed_groups.add(item.group)
            fifo_stops = s.event_type is EventType.SQS_FIFO and not s.skip_group_on_error
            if fifo_stops or s.stop_on_first_failure:
                self._stopped = True
