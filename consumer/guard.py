"""The guard: one record, processed once."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import io
import logging
import os
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, final

from consumer._context import current_lambda_context, system_clock
from consumer._errors import (
    AlreadyProcessed,
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
    InvalidResultError,
    NestedReplayError,
)
from consumer._serde import ResultEncodingError, decode_result, encode_result
from consumer.config import IdempotencyConfig
from consumer.keys import make_key, payload_hash
from persistence import IdempotencyError, IdempotencyRecord, ItemTooLargeError, PersistenceLayer, RecordStatus

if TYPE_CHECKING:
    from types import TracebackType

    from consumer._cache import LocalCache
    from consumer._context import Clock, LambdaContext

logger = logging.getLogger("idempotent_consumer")


@functools.lru_cache(maxsize=4)
def _default_config(function_name: str | None) -> IdempotencyConfig:  # noqa: ARG001 - the cache key
    return IdempotencyConfig()


_warned_invocation: list[str | None] = []


# Leases of the locks this process holds right now (set operations are atomic under the GIL). Only read
# to explain a conflict: a guard nested on its own record's key meets its own lock on every delivery.
_held_leases: set[str] = set()
_TRUE = frozenset(("1", "true", "yes", "y", "on"))
_FALSE = frozenset(("", "0", "false", "no", "n", "off"))


def idempotency_disabled() -> bool:
    """Whether ``IDEMPOTENCY_DISABLED`` turns every guard into a pass-through (for users' unit tests).

    Only an explicit true value disables (``1``, ``true``, ``yes``, ``y``, ``on``, any case). A value that is
    neither true nor false (``disabled``, ``tru``) keeps idempotency on and logs a warning: a typo must not
    switch off the one protection against double charges.
    """
    value = os.environ.get("IDEMPOTENCY_DISABLED", "").strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    _warn_unrecognised_disabled(value)
    return False


@functools.lru_cache(maxsize=8)
def _warn_unrecognised_disabled(value: str) -> None:
    logger.warning(
        "IDEMPOTENCY_DISABLED=%r is not a true or false value: idempotency stays ON (use 1/true/yes/on to disable)",
        value,
    )


def _warn_unguarded(context: LambdaContext | None) -> None:
    # Once per invocation (per process without a context), not once per record.
    invocation = None if context is None else context.aws_request_id
    if _warned_invocation and _warned_invocation[0] == invocation:
        return
    _warned_invocation[:] = [invocation]
    logger.warning("no idempotency key selected: running the record(s) unguarded (invocation %s)", invocation)


@final
class IdempotencyGuard:
    """Runs one record exactly once: lock on enter, commit (or release) on exit.

    ``__enter__`` takes an ``IN_PROGRESS`` lock with one conditional write and raises
    :class:`AlreadyProcessed` for a record that already completed (the body does not run) or
    :class:`IdempotencyAlreadyInProgressError` while another invocation holds the lock. ``__exit__`` commits
    ``guard.result`` on success, releases the lock when the body raised (the body's exception always
    propagates), and never swallows an exception.

    Example:
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
    """

    def __init__(
        self,
        data: Any,
        *,
        store: PersistenceLayer,
        config: IdempotencyConfig | None = None,
        context: LambdaContext | None = None,
        clock: Clock = system_clock,
        key_prefix: str | None = None,
        disabled: bool | None = None,
    ) -> None:
        """Prepare the guard; nothing is sent before ``__enter__``.

        Args:
            data: The record (or function argument) the key is selected from.
            store: Where records live.
            config: Key selection and timings; defaults to ``IdempotencyConfig()``.
            context: The Lambda context (its deadline bounds the lock); defaults to the registered one.
            clock: Epoch seconds; inject one to test expiry without sleeping.
            key_prefix: Overrides ``config.prefix`` (``@idempotent_function`` adds the function's name).
            disabled: Pass-through without a store; ``None`` reads ``IDEMPOTENCY_DISABLED`` on enter (the
                batch processor reads it once per batch and passes it).
        """
        self.data = data
        self.store = store
        self.config = config or _default_config(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))
        self.context = context if context is not None else current_lambda_context()
        self.clock = clock
        self.key_prefix = key_prefix
        self.disabled = disabled
        self.key: str | None = None
        self.result: Any = None
        self.release_error: IdempotencyError | None = None
        self._held: IdempotencyRecord | None = None
        self._cache: LocalCache | None = None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _lock_deadline_ms(self, now_ms: int) -> int:
        if self.context is None:
            return now_ms + self.config.lock_timeout_seconds * 1000
        remaining = self.context.get_remaining_time_in_millis()  # never negative: a lock already expired when taken
        return now_ms + max(0, remaining) + self.config.lock_grace_ms

    def __enter__(self) -> IdempotencyGuard:
        """Take the lock; raise ``AlreadyProcessed`` or ``IdempotencyAlreadyInProgressError`` if we may not run.

        Raises:
            AlreadyProcessed: The record completed before; carries the stored response.
            IdempotencyAlreadyInProgressError: Another invocation holds a live lock.
            IdempotencyValidationError: The stored record was made for a different payload.
            IdempotencyKeyError: The key could not be selected.
            PersistenceLayerError: The store failed.
        """
        if self.disabled if self.disabled is not None else idempotency_disabled():
            return self
        self.key = make_key(self.data, self.config, self.key_prefix)
        if self.key is None:
            _warn_unguarded(self.context)
            return self
        validation_hash = payload_hash(self.data, self.config)
        now_ms = self._now_ms()
        self._cache = cache = None if self.config.local_caches is None else self.config.cache_for(self.store)
        cached = cache.get(self.key, now_ms) if cache is not None else None
        if cached is not None:
            self._replay(cached, validation_hash, None)
        expires_at = now_ms // 1000 + self.config.expires_after_seconds
        record = IdempotencyRecord.in_progress(
            self.key,
            expires_at=expires_at,
            lock_deadline_ms=self._lock_deadline_ms(now_ms),
            payload_hash=validation_hash,
        )
        existing = self.store.acquire(record, now_ms)
        if existing is None:
            self._held = record
            _held_leases.add(record.lease)
            return self
        if existing.status is RecordStatus.COMPLETE:
            self._replay(existing, validation_hash, now_ms)
        holder = (
            "a guard of this same process: an enclosing guard, or another thread or task (a guard nested in "
            "another's body needs a key of its own: another key_prefix, or an event_key_jmespath selecting the step)"
            if existing.lease in _held_leases
            else "another invocation"
        )
        raise IdempotencyAlreadyInProgressError(
            f"{self.key!r} is being processed by {holder} until {existing.in_progress_expires_at} (epoch ms)",
            key=self.key,
            existing_record=existing,
        )

    def _replay(self, record: IdempotencyRecord, validation_hash: str | None, read_at_ms: int | None) -> NoReturn:
        # read_at_ms: when the record was read from the store; None for a cache hit, which must not renew
        # its own entry's age (or a steady stream of duplicates would keep a deleted record cached forever).
        if self.config.validation_expression is not None and record.payload_hash != validation_hash:
            raise IdempotencyValidationError(
                f"{record.key!r} was processed for a different payload (payload_validation_jmespath "
                f"{self.config.payload_validation_jmespath!r})",
                key=record.key,
                existing_record=record,
            )
        if self._cache is not None and read_at_ms is not None:
            self._cache.put(record, read_at_ms)
        response = None if record.response is None else decode_result(record.response)
        if self.config.response_hook is not None:
            response = self.config.response_hook(response, record)
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
        held, self._held = self._held, None
        if held is not None:
            _held_leases.discard(held.lease)
        if exc is None and type(self.result) not in _PLAIN_RESULTS and _never_ran(self.result):
            raise self._refuse(held, [self.result])
        if held is not None:
            if exc is None:
                self._commit(held)
                return False
            self._release(held, exc)
        if isinstance(exc, AlreadyProcessed):
            # Only our own __enter__ may say "done"; __exit__ never runs after it raised.
            raise NestedReplayError(
                f"a nested guard's replay of {exc.key!r} escaped the body of {self.key!r}: the body did not "
                "finish, so the record failed (catch AlreadyProcessed around the nested guard to carry on)",
                key=self.key,
                existing_record=exc.record,
            ) from exc
        return False

    def _refuse(self, held: IdempotencyRecord | None, unrun: list[Any]) -> InvalidResultError:
        """Close the unrun coroutines and generators, release the lock, and return the error to raise."""
        kinds = sorted({type(part).__name__ for part in unrun})
        for part in unrun:
            if isinstance(part, (GeneratorType, CoroutineType)):
                part.close()  # a coroutine left unclosed warns "never awaited" at some random later point
        where = "is" if unrun[0] is self.result else "holds"
        self.result = None
        invalid = InvalidResultError(
            f"the result of {self.key!r} {where} a {' and a '.join(kinds)}: the work it stands for has not run, so "
            "it is not committed (await it or consume it inside the body)",
            key=self.key,
        )
        if held is not None:
            self._release(held, invalid)
        return invalid

    def _commit(self, held: IdempotencyRecord) -> None:
        try:
            response: str | None = encode_result(self.result)
        except Exception as e:  # noqa: BLE001 - ResultEncodingError, or a bug in a user's encoder hook
            self._unstorable(held, e)  # raises for unrun work; otherwise commit without the response
            response = None
        complete = held.completed(response, int(self.clock()) + self.config.expires_after_seconds)
        try:
            self.store.complete(complete)
        except ItemTooLargeError as e:
            logger.warning("result of %r is too large to store (%s): committing without it", held.key, e)
            complete = dataclasses.replace(complete, response=None)
            self.store.complete(complete)
        if self._cache is not None:
            self._cache.put(complete, self._now_ms())

    def _unstorable(self, held: IdempotencyRecord, error: Exception) -> None:
        # The body ran: whatever goes wrong encoding its result must not keep the record from committing,
        # or the side effect would run again once the lock lapses. Unless the result holds work that has not
        # run (a coroutine in a list, a map object, a Future): committing it would lose that work.
        unrun = _unrun_parts(self.result)
        if unrun:
            raise self._refuse(held, unrun) from error
        cause = error if isinstance(error, ResultEncodingError) else repr(error)
        logger.warning("result of %r cannot be stored (%s): committing without it", held.key, cause)

    def _release(self, held: IdempotencyRecord, exc: BaseException) -> None:
        try:
            self.store.release(held.key, held.lease)
        except IdempotencyError as e:
            self.release_error = e
            logger.error("could not release %r after the body raised %r: %s", held.key, exc, e)  # noqa: TRY400
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"idempotent-consumer: releasing {held.key!r} failed as well: {e!r}")


_MAX_SEARCH_DEPTH = 64
_PLAIN_RESULTS = frozenset((dict, list, str, int, float, bool, type(None), tuple))


def _never_ran(result: Any) -> bool:
    """Whether ``result`` stands for work not done yet: an awaitable, a generator or an async generator.

    The caller skips plain types first (the usual results), so no isinstance and getattr run per record.
    """
    return isinstance(result, (GeneratorType, AsyncGeneratorType)) or hasattr(type(result), "__await__")


def _unrun_parts(value: Any, depth: int = 0, seen: set[int] | None = None) -> list[Any]:
    """Work not yet done inside a result: awaitables, iterators (``map``, generators), async iterators, Futures.

    Only called once a result failed to encode (plain data never holds these), so it costs nothing otherwise.
    """
    t = type(value)
    if (t in _PLAIN_RESULTS and t not in (dict, list, tuple)) or depth > _MAX_SEARCH_DEPTH:
        return []
    if (
        hasattr(t, "__await__")
        or hasattr(t, "__anext__")
        or (hasattr(t, "__next__") and not isinstance(value, io.IOBase))
        or isinstance(value, concurrent.futures.Future)
    ):
        return [value]
    seen = set() if seen is None else seen
    if id(value) in seen:  # a cycle: already searched
        return []
    seen.add(id(value))
    if isinstance(value, dict):
        children: Any = value.values()
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = [getattr(value, f.name) for f in dataclasses.fields(value)]
    else:
        return []
    return [part for child in children for part in _unrun_parts(child, depth + 1, seen)]
