"""The guard: one record, processed once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NoReturn, final

from consumer._async import acquire_settled, settled
from consumer._context import current_lambda_context, enter_key, leave_key, system_clock
from consumer._errors import (
    AlreadyProcessed,
    IdempotencyValidationError,
    InvalidResultError,
    NestedReplayError,
)
from consumer._output import decode_output, hooked_response, unstored
from consumer._reports import hold, idempotency_disabled, in_progress_error, let_go, release_failure, warn_unguarded
from consumer._result import (
    PLAIN_RESULTS,
    acommit,
    check_serializer,
    commit,
    completed_record,
    never_ran,
    queue,
    refusal,
)
from consumer.config import function_config, lock_deadline_ms
from consumer.keys import make_key, missing_key_message, payload_hash
from persistence import (
    IdempotencyError,
    IdempotencyRecord,
    InlineStore,
    RecordStatus,
    as_async_store,
    is_async_store,
)
from persistence._record import in_progress_record

if TYPE_CHECKING:
    from contextvars import Token
    from types import TracebackType

    from consumer._context import Clock, LambdaContext
    from consumer.config import IdempotencyConfig
    from consumer.serialization import BaseIdempotencySerializer
    from persistence import AsyncPersistenceLayer, ItemTooLargeError, PersistenceLayer
    from persistence._cache import LocalCache


@final
class IdempotencyGuard:
    """Runs one record exactly once: lock on enter, commit (or release) on exit.

    ``__enter__`` takes an ``IN_PROGRESS`` lock with one conditional write and raises
    :class:`AlreadyProcessed` for a record that already completed (the body does not run) or
    :class:`IdempotencyAlreadyInProgressError` while another invocation holds the lock. ``__exit__`` commits
    ``guard.result`` on success, releases the lock when the body raised (the body's exception always
    propagates), and never swallows an exception.

    Examples:
        >>> from persistence import InMemoryPersistenceLayer
        >>> store = InMemoryPersistenceLayer()
        >>> record = {"messageId": "m-1", "body": "{}"}
        >>> with IdempotencyGuard(record, store=store) as guard:
        ...     guard.result = {"charged": True}
        >>> try:
        ...     with IdempotencyGuard(record, store=store) as guard:
        ...         raise AssertionError("not reached: the body does not run twice")
        ... except AlreadyProcessed as done:
        ...     print(done.response)
        {'charged': True}

    Attributes:
        key: The idempotency key (pass it downstream: payment APIs take one). ``None`` when the record runs
            unguarded (no key selected, or ``IDEMPOTENCY_DISABLED``).
        result: Set it in the body; it is stored and replayed for duplicates.
        release_error: Set when releasing the lock after a failed body failed too.
        release_on_failure: When the body raises, release the lock so a redelivery can run at once (the
            default). Set it to ``False`` in a body whose work may outlive it (work handed to a thread, which
            no cancellation stops): the lock is then left to expire at its deadline. ``AsyncBatchProcessor``
            does so for the bodies it cancels at the deadline.
        committed: Whether the result was stored (``COMPLETE``): true once ``__exit__`` committed it.
        output_serializer: Stores ``result`` and rebuilds a replayed response. Set it before entering: a
            duplicate replays through the one the guard entered with, so a result whose serializer the body
            changed is committed without its response (logged).
    """

    def __init__(
        self,
        data: Any,
        *,
        store: PersistenceLayer | AsyncPersistenceLayer,
        config: IdempotencyConfig | None = None,
        context: LambdaContext | None = None,
        clock: Clock = system_clock,
        key_prefix: str | None = None,
        disabled: bool | None = None,
        output_serializer: BaseIdempotencySerializer | None = None,
    ) -> None:
        """Prepare the guard; nothing is sent before ``__enter__``.

        Args:
            data: The record (or function argument) the key is selected from.
            store: Where records live: a sync store (both ``with`` and ``async with`` work), or an async one
                (:class:`persistence.AsyncPersistenceLayer`, ``async with`` only).
            config: Key selection and timings; defaults to ``IdempotencyConfig()``.
            context: The Lambda context (its deadline bounds the lock); defaults to the registered one.
            clock: Epoch seconds; inject one to test expiry without sleeping.
            key_prefix: Overrides ``config.prefix`` (``@idempotent_function`` adds the function's name).
            disabled: Pass-through without a store; ``None`` reads ``IDEMPOTENCY_DISABLED`` on enter (the
                batch processor reads it once per batch and passes it).
            output_serializer: Stores ``result`` and rebuilds a replayed response (:mod:`consumer.serialization`).
        """
        self.data = data
        self.store = store
        self.config = config or function_config()
        self.context = context if context is not None else current_lambda_context()
        self.clock = clock
        self.key_prefix = key_prefix
        self.disabled = disabled
        if output_serializer is not None:
            check_serializer(output_serializer)
        self.output_serializer = self._entered_serializer = output_serializer
        self.key: str | None = None
        self.result: Any = None
        self.release_error: IdempotencyError | None = None
        self.release_on_failure = True
        self.committed = False
        self._held: IdempotencyRecord | None = None
        self._cache: LocalCache | None = None
        self._validation_hash: str | None = None
        self._astore: AsyncPersistenceLayer | None = None
        self._key_token: Token[IdempotencyGuard | None] | None = None
        self._unstored: BaseException | None = None  # why the result is committed without its response
        # (item identifier, event source) when a batch processor runs this record: it logs the record's outcome.
        self._batch_record: tuple[str, str] | None = None
        # The remaining time a batch processor read for this record's deadline-margin check an instant before: the lock
        # deadline derives from it (None: read when the lock is taken).
        self._remaining_ms: int | None = None
        self._unkeyed = False  # no key was selected, and the config lets it run unguarded
        self._writes: list[Any] = []  # guard.write's, in the store's own shape

    def _no_key(self) -> str | None:
        """Why the body ran unguarded, built when it is said (``None``: it did not, or idempotency is disabled)."""
        return missing_key_message(self.data, self.config) if self._unkeyed else None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def __enter__(self) -> IdempotencyGuard:
        """Take the lock; raise ``AlreadyProcessed`` or ``IdempotencyAlreadyInProgressError`` if we may not run.

        Raises:
            AlreadyProcessed: The record completed before; carries the stored response.
            IdempotencyAlreadyInProgressError: Another invocation holds a live lock.
            IdempotencyValidationError: The stored record was made for a different payload.
            ResponseDecodeError: The stored response does not fit ``output_serializer`` (the body does not run).
            IdempotencyKeyError: The key could not be selected.
            PersistenceLayerError: The store failed.
            TypeError: ``store`` is async only: use ``async with``.
        """
        begun = self._begin()
        if begun is not None:
            record, now_ms = begun
            existing = self._sync_store().acquire(record, now_ms)
            cutover = self.config.powertools_cutover  # consumer.powertools
            if existing is None and cutover is not None and cutover.is_open(now_ms):  # hook: key free, body next
                limit = self.config.max_decoded_bytes
                existing = cutover.read_through(self.data, record, self._sync_store(), now_ms, limit)
            self._acquired(record, now_ms, existing)
        return self._entered()

    async def __aenter__(self) -> IdempotencyGuard:
        """``async with``: the same as ``__enter__``, with the store reached without blocking the event loop.

        A store whose calls never wait (the in-memory one) is called on the loop; a sync store that waits on
        I/O runs in a bounded thread pool (:func:`persistence.as_async_store`); a native async store is awaited.
        A cancellation that arrives while the lock is being taken waits for the store's answer, releases a lock
        that was taken, and then propagates: the body does not run.

        Raises:
            The same as ``__enter__`` (and ``asyncio.CancelledError``).
        """
        begun = self._begin()
        if begun is None:
            return self._entered()
        record, now_ms = begun
        store = self._async_store()
        if isinstance(store, InlineStore):
            existing = store.store.acquire(record, now_ms)
        else:
            existing = await acquire_settled(store.acquire(record, now_ms), store, record)
        cutover = self.config.powertools_cutover  # consumer.powertools
        if existing is None and cutover is not None and cutover.is_open(now_ms):  # hook: key free, body next
            limit = self.config.max_decoded_bytes
            existing = await cutover.aread_through(self.data, record, store, now_ms, limit)
        self._acquired(record, now_ms, existing)
        return self._entered()

    def write(self, item: Any, params: Any = None) -> None:
        """In the body: queue a write committed with the record, or not at all (see docs/exactly-once-writes.md)."""
        queue(self.store, None if self._held is None else self._held.key, self._writes, item, params)

    def _entered(self) -> IdempotencyGuard:
        """The body runs next: its key (``None`` unguarded) is ``current_idempotency_key()`` until ``__exit__``."""
        self._writes = []
        self._key_token = enter_key(self)
        self._entered_serializer = self.output_serializer
        return self

    def _leave(self) -> None:
        token, self._key_token = self._key_token, None
        if token is not None:
            leave_key(token)

    def _sync_store(self) -> PersistenceLayer:
        if is_async_store(self.store):
            msg = f"{type(self.store).__name__} is an async store: use `async with IdempotencyGuard(...)`"
            raise TypeError(msg)
        return self.store  # type: ignore[return-value]  # the sync member of the union, checked above

    def _async_store(self) -> AsyncPersistenceLayer:
        if self._astore is None:
            self._astore = as_async_store(self.store)
        return self._astore

    def _begin(self) -> tuple[IdempotencyRecord, int] | None:
        """Everything before the acquire: the record to write and when, or ``None`` to run unguarded.

        Raises ``AlreadyProcessed`` for a local-cache hit (nothing is sent).
        """
        if self.disabled if self.disabled is not None else idempotency_disabled():
            return None
        self.key = make_key(self.data, self.config, self.key_prefix)
        if self.key is None:  # raise_on_no_idempotency_key=False: the user chose to run it unguarded
            self._unkeyed = True
            if self._batch_record is None:  # a batch processor logs each unguarded record itself
                warn_unguarded(self.context, self._no_key)
            return None
        self._validation_hash = validation_hash = payload_hash(self.data, self.config)
        now_ms = int(self.clock() * 1000)  # as _now_ms(), without its call (per record)
        self._cache = cache = None if self.config.local_caches is None else self.config.cache_for(self.store)
        cached = cache.get(self.key, now_ms) if cache is not None else None
        if cached is not None:
            self._replay(cached, validation_hash, None)
        expires_at = now_ms // 1000 + self.config.expires_after_seconds
        lock_deadline = lock_deadline_ms(self.config, self.context, now_ms, self._remaining_ms)
        return in_progress_record(self.key, expires_at, lock_deadline, validation_hash), now_ms

    def _acquired(self, record: IdempotencyRecord, now_ms: int, existing: IdempotencyRecord | None) -> None:
        """Act on the acquire's answer: hold the lock, replay a completed record, or refuse a live lock."""
        if existing is None:
            self._held = record
            hold(record.lease)
            return
        if not isinstance(existing, IdempotencyRecord):
            msg = f"{type(self.store).__name__}.acquire returned {existing!r}, not an IdempotencyRecord or None"
            raise TypeError(msg)
        if existing.status is RecordStatus.COMPLETE:
            self._replay(existing, self._validation_hash, now_ms)
        raise in_progress_error(record.key, existing)

    def _replay(self, record: IdempotencyRecord, validation_hash: str | None, read_at_ms: int | None) -> NoReturn:
        # read_at_ms: when the record was read from the store; None for a cache hit, which must not renew
        # its own entry's age (or a steady stream of duplicates would keep a deleted record cached forever).
        if self.config.validation_expression is not None and record.payload_hash != validation_hash:
            raise IdempotencyValidationError(
                f"Payload does not match stored record for this event key: {record.key!r} was processed for a "
                f"different payload (payload_validation_jmespath "
                f"{self.config.payload_validation_jmespath!r})",
                key=record.key,
                existing_record=record,
            )
        if self._cache is not None and read_at_ms is not None:
            self._cache.put(record, read_at_ms)
        response = decode_output(record, self.output_serializer)
        if self.config.response_hook is not None:
            response = hooked_response(self.config.response_hook, response, record)
        raise AlreadyProcessed(record.key, response, record)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        """Commit ``result`` on success; release the lock when the body raised. Never swallows ``exc``.

        Raises:
            NestedReplayError: An ``AlreadyProcessed`` of a guard nested in the body escaped it: the body did
                not finish, so the lock was released (chained to that ``AlreadyProcessed``).
            InvalidResultError: ``result`` is a coroutine, awaitable or generator: nothing ran, so the lock
                was released.
            LockLostError: We ran past our lock deadline and another invocation took the record over; our
                result is not stored and theirs stands.
            PersistenceLayerError: The store failed while committing.
        """
        self._leave()
        held, complete, failure = self._closing(exc)
        # A lock held was taken through the sync face: __enter__ checked the store, or __aenter__ called it inline
        # (its __aexit__ comes here only then). Not checked again per record.
        store: PersistenceLayer = self.store  # type: ignore[assignment]  # the sync member of the union, as said
        if complete is not None:
            committed, too_large = commit(store, held, complete, self._writes, self._release_failed)
            self._committed(committed, too_large)  # not *commit(...): a call by star costs a few times more
        elif held is not None:
            try:
                store.release(held)
            except Exception as e:  # noqa: BLE001 - any store's failure: the body's exception still wins
                self._release_failed(held, failure, e)
        return False if exc is None and failure is None else self._closed(exc, failure)  # per record: no call

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        """``async with``: the same as ``__exit__``; the store is reached as in ``__aenter__``.

        A body cancelled by ``asyncio`` (``CancelledError``) is a body that raised: the lock is released and
        nothing is committed. Once the body has finished, a cancellation no longer interrupts the commit or the
        release: it waits for the store's answer, then propagates.

        Raises:
            The same as ``__exit__``.
        """
        self._leave()
        store = self._async_store() if self._held is not None else None
        # The sync face, exactly, when nothing is to be awaited: only on the sync store itself (given the InlineStore
        # itself, __exit__ would call its async complete and drop the coroutine: the record left IN_PROGRESS).
        if store is None or (isinstance(store, InlineStore) and store is not self.store):
            return self.__exit__(exc_type, exc, traceback)
        held, complete, failure = self._closing(exc)
        if complete is not None:
            ok, big, done, cancelled = await acommit(store, held, complete, self._writes, self._release_failed)
            if ok is not None:
                self._committed(ok, big)
            if cancelled is not None:  # the commit's answer came first: acted on, the cancellation goes on
                raise cancelled from (None if done.cancelled() else done.exception())
            done.result()  # the store's error, if any
        elif held is not None:
            try:
                await settled(store.release(held))
            except Exception as e:  # noqa: BLE001 - any store's failure: the body's exception still wins
                self._release_failed(held, failure, e)
        return self._closed(exc, failure)

    def _closing(
        self, exc: BaseException | None
    ) -> tuple[IdempotencyRecord | None, IdempotencyRecord | None, BaseException | None]:
        """Decide how the body's exit ends, before any store call: ``(held, complete, failure)``.

        ``complete`` is the record to commit (the body returned and its result may be stored), with ``failure``
        the ``BaseException`` to raise once it is committed when one stopped the result's storing; otherwise a
        held lock is released because of ``failure``: the body's exception, or the refusal of a result that
        stands for unrun work (a coroutine, a generator, one nested in the result).
        """
        held, self._held = self._held, None
        if held is not None:
            let_go(held.lease)
        if exc is not None:
            return (held if self.release_on_failure else None), None, exc
        if type(self.result) not in PLAIN_RESULTS and never_ran(self.result):
            unrun, self.result = self.result, None
            return held, None, refusal(self.key, unrun, [unrun], None)
        if held is None:
            return None, None, None
        expires_at = int(self.clock()) + self.config.expires_after_seconds
        try:
            complete, self._unstored, interrupted = completed_record(
                held, self.result, self.output_serializer, expires_at, replays_with=self._entered_serializer
            )
        except InvalidResultError as refused:
            self.result = None
            return held, None, refused
        return held, complete, interrupted

    def _closed(self, exc: BaseException | None, failure: BaseException | None) -> Literal[False]:
        """After the commit or the release (or with nothing held): raise what the body's exit calls for, else False."""
        if failure is not None and failure is not exc:
            # The refusal of an unrun result, chained to its cause; or what stopped the result's storing, once the
            # record is committed without it.
            raise failure
        if isinstance(exc, AlreadyProcessed):
            # Only our own __enter__ may say "done"; __exit__ never runs after it raised.
            raise NestedReplayError.escaping(self.key, exc) from exc
        return False

    def _committed(self, complete: IdempotencyRecord, too_large: ItemTooLargeError | None = None) -> None:
        self._unstored = too_large or self._unstored  # too large: committed without its response
        self.committed = True
        if self._cache is not None:
            self._cache.put(complete, self._now_ms())
        if self._unstored is not None:  # said once committed: a commit that fails is the record's failure instead
            unstored(complete.key, self._unstored, self.context, self._batch_record)

    def _release_failed(self, held: IdempotencyRecord, exc: BaseException | None, error: Exception) -> None:
        log = self._batch_record is None  # a batch processor names it on the record's own failure
        self.release_error = release_failure(held.key, exc, error, self.context, log=log)
