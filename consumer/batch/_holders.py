"""Records of one batch that share an idempotency key: the later one waits for the earlier instead of failing.

With ``max_workers`` above 1, records of different ordering groups run at once (two Kafka partitions, two
Kinesis partition keys, two SQS messages). When two of them carry the same key (a producer's retry that landed in
another partition, a payload field selected by ``event_key_jmespath``), the second meets the first one's
``IN_PROGRESS`` lock. Held by another invocation, that lock fails the record, to be redelivered later. Held by a
record of this same batch, the record waits for that holder's guard to end (an event set when it ends, however
it ends: committed, released, or interrupted by a ``BaseException`` or a cancellation), then tries again: it
replays what the holder committed, or runs if the holder failed and released the key.

The wait is bounded by the processor's deadline margin (past it, the record is deferred: not run for lack of
time) and by the holder's lock deadline (past it, the record is in progress, as before). No two records can wait
for each other: a record waits only once its own acquire failed (it holds no lock of the batch), and only for a
record that holds one, which never waits while it does. Each wait is for another holding (a record takes a lock at
most once), so the tries of one record are finite too.

The holder is known by the lease of the lock the waiter met. Between a holder's acquire and the start of its
body, its lease is not known here yet: a waiter that meets a lease it does not know first waits for the records
of the batch still entering a guard on that key to get past their acquire.

The async run tracks tries only once a second worker starts: before that one task runs the records one after
another, and none can meet the lock of another still in flight. The try in flight when it starts is tracked from
then on as one still entering its guard: a record meeting a lock on its key waits for it to end, then tries again.
"""

from __future__ import annotations

import enum
import threading
import time
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from consumer._errors import IdempotencyAlreadyInProgressError

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from types import TracebackType

    from consumer.guard import IdempotencyGuard


# Marks in a record's ``retried`` set (beside leases, which never start with a NUL): it waited for a record still
# entering its guard on this key, and it tried again after that record ended without holding the lock.
_ENTERING, _ENTERING_RETRIED = "\0entering:", "\0entering-retried:"


class _Event(Protocol):
    def set(self) -> None: ...  # threading.Event's and asyncio.Event's


EventT = TypeVar("EventT", bound=_Event)


class Waited(enum.Enum):
    """How a record's wait for the holder of the lock it met ended."""

    RETRY = "retry"  # the holder, a record of this batch, ended: enter the guard again
    NOT_OURS = "not_ours"  # another invocation holds the lock: not waited for
    OUT_OF_TIME = "out_of_time"  # the holder is ours, but it did not end within the deadline margin (or its lock's)
    NO_SPARE_WORKER = "no_spare_worker"  # other groups wait for a worker: a wait would hold theirs up, not waited


class _Attempt(Generic[EventT]):
    """One record's try at its guard, as the batch's other records see it: whether it got past its acquire (its lease
    is then known), whether it ended, and the events its waiters wait on."""  # noqa: D205, D209 - one sentence

    __slots__ = ("decided", "decided_event", "ended", "ended_event", "guard")

    def __init__(self, guard: IdempotencyGuard) -> None:
        self.guard = guard
        self.decided = self.ended = False
        self.decided_event: EventT | None = None  # made when a record first waits on it
        self.ended_event: EventT | None = None


class _Trying(Generic[EventT]):
    """``with holders.trying(guard) as attempt:`` around the guard's ``with``: :meth:`BatchHolders.begin` and
    :meth:`BatchHolders.end` of ``guard``'s try, however the block is left (a ``BaseException`` or a cancellation
    too: whoever waits on the record wakes).

    A lock the guard's own enter met is kept as :attr:`conflict`, to wait for, and not raised; one met after the
    enter was met by a guard nested in the body: the body failed, and it propagates.
    """  # noqa: D205 - one sentence

    __slots__ = ("conflict", "guard", "holders")

    def __init__(self, holders: BatchHolders[EventT], guard: IdempotencyGuard) -> None:
        self.holders, self.guard = holders, guard
        self.conflict: IdempotencyAlreadyInProgressError | None = None

    def __enter__(self) -> _Trying[EventT]:
        self.holders.begin(self.guard)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        entered = self.holders.end(self.guard)
        if isinstance(exc, IdempotencyAlreadyInProgressError) and not entered:
            self.conflict = exc
            return True
        return False


class BatchHolders(Generic[EventT]):
    """The locks the records of one batch run hold, by lease, and the tries still entering their guard.

    The sync run uses ``threading.Event`` (records in threads), the async one ``asyncio.Event`` (tasks of a loop).
    """

    def __init__(self, new_event: Callable[[], EventT]) -> None:
        """Track nothing yet; ``new_event`` makes the events waiters wait on."""
        self._new_event = new_event
        self._mutex = threading.Lock()
        self._live: dict[int, _Attempt[EventT]] = {}  # tries under way, by id(guard): at most one per worker
        self._by_lease: dict[str, _Attempt[EventT]] = {}  # tries that took a lock, ended or not

    def trying(self, guard: IdempotencyGuard) -> _Trying[EventT]:
        """``guard``'s try, to enter (a ``with``) before the guard is entered."""
        return _Trying(self, guard)

    def begin(self, guard: IdempotencyGuard) -> None:
        """``guard`` is about to be entered: a record meeting a lock on its key it does not know waits for it."""
        with self._mutex:
            self._live[id(guard)] = _Attempt(guard)

    def hold(self, guard: IdempotencyGuard) -> None:
        """``guard`` was entered (its body runs next): a record meeting its lock now knows it by its lease."""
        held = guard._held  # noqa: SLF001 - the lease the batch's other records meet is known to the guard alone
        with self._mutex:
            attempt = self._live[id(guard)]
            if held is not None:  # None: the record runs unguarded
                self._by_lease[held.lease] = attempt
            attempt.decided = True
            if attempt.decided_event is not None:
                attempt.decided_event.set()

    def end(self, guard: IdempotencyGuard) -> bool:
        """``guard``'s try ended (its lock committed or released, or never taken): wake whoever waits on it.

        Returns whether it got past its enter: a lock met since was met in its body.
        """
        with self._mutex:
            attempt = self._live.pop(id(guard))
            entered = attempt.decided
            attempt.decided = attempt.ended = True
            for event in (attempt.decided_event, attempt.ended_event):
                if event is not None:
                    event.set()
            return entered

    def next_step(self, conflict: IdempotencyAlreadyInProgressError, retried: set[str]) -> Waited | EventT:
        """What a record that met ``conflict`` does next: try again, fail (not ours), or wait on an event.

        After the wait, it asks again. ``retried``: the leases the record tried again after, once each: a lock that
        outlived its holder (whose release failed) is in progress until its deadline, as another invocation's.
        """
        existing = conflict.existing_record
        with self._mutex:
            holder = None if existing is None else self._by_lease.get(existing.lease)
            if holder is not None and existing is not None:
                if not holder.ended:
                    return self._event(holder, ended=True)
                if existing.lease in retried:
                    return Waited.NOT_OURS
                retried.add(existing.lease)
                return Waited.RETRY
            for attempt in self._live.values():  # the holder may still be between its acquire and its body
                if not attempt.decided and attempt.guard.key == conflict.key:
                    retried.add(f"{_ENTERING}{conflict.key}")
                    return self._event(attempt, ended=False)
        if f"{_ENTERING}{conflict.key}" in retried and f"{_ENTERING_RETRIED}{conflict.key}" not in retried:
            # The record it waited for ended without holding the lock past its enter (a Powertools cut-over replay
            # takes our lock, then finds the record completed): try once more, to replay what it left.
            retried.add(f"{_ENTERING_RETRIED}{conflict.key}")
            return Waited.RETRY
        return Waited.NOT_OURS

    def _event(self, attempt: _Attempt[EventT], *, ended: bool) -> EventT:
        event = attempt.ended_event if ended else attempt.decided_event
        if event is None:
            event = self._new_event()
            if ended:
                attempt.ended_event = event
            else:
                attempt.decided_event = event
        return event


def wait_deadline(conflict: IdempotencyAlreadyInProgressError, remaining_ms: int | None, now_ms: int) -> float | None:
    """Until when (``time.monotonic()``) a record may wait for the holder of ``conflict``'s lock; ``None``: no bound.

    Args:
        conflict: The lock the record met; a wait ends by the holder's lock deadline, when the lock may be taken over.
        remaining_ms: Time left before the processor's deadline margin (``None`` without a Lambda context).
        now_ms: The guard's clock, epoch milliseconds (the lock deadline's clock).
    """
    bounds = [] if remaining_ms is None else [remaining_ms]
    existing = conflict.existing_record
    if existing is not None and existing.in_progress_expires_at is not None:
        bounds.append(existing.in_progress_expires_at - now_ms)
    return time.monotonic() + min(bounds) / 1000 if bounds else None


def _next(
    holders: BatchHolders[EventT],
    conflict: IdempotencyAlreadyInProgressError,
    retried: set[str],
    deadline: float | None,
) -> Waited | tuple[EventT, float | None]:
    """What the record does next (:meth:`BatchHolders.next_step`); an event to wait on comes with the seconds left."""
    step = holders.next_step(conflict, retried)
    if step is Waited.NOT_OURS:
        return step
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        return Waited.OUT_OF_TIME  # too close to the deadline to wait longer, or to start the record again
    return step if isinstance(step, Waited) else (step, left)


def wait_for_holder(
    holders: BatchHolders[threading.Event],
    deadline: float | None,
    conflict: IdempotencyAlreadyInProgressError,
    retried: set[str],
) -> Waited:
    """Wait (in this thread) until the record of this batch holding ``conflict``'s lock ended, ``deadline`` at most.

    Returns at once when another invocation holds the lock. ``retried``: see :meth:`BatchHolders.next_step`.
    """
    while not isinstance(step := _next(holders, conflict, retried, deadline), Waited):
        event, left = step
        if not event.wait(left):
            return Waited.OUT_OF_TIME
    return step


async def await_holder(
    holders: BatchHolders[asyncio.Event],
    deadline: float | None,
    conflict: IdempotencyAlreadyInProgressError,
    retried: set[str],
) -> Waited:
    """:func:`wait_for_holder` for the tasks of one event loop: the loop runs the holder meanwhile."""
    import asyncio  # noqa: PLC0415 - only async batches wait here: a sync function's cold start never imports it

    while not isinstance(step := _next(holders, conflict, retried, deadline), Waited):
        event, left = step
        try:
            await asyncio.wait_for(event.wait(), left)
        except asyncio.TimeoutError:
            return Waited.OUT_OF_TIME
    return step
