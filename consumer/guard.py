"""The guard: one record, processed once."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from typing import TYPE_CHECKING, Any, Literal, NoReturn, final

from consumer._context import current_lambda_context, system_clock
from consumer._errors import AlreadyProcessed, IdempotencyAlreadyInProgressError, IdempotencyValidationError
from consumer._serde import dumps_result
from consumer.config import IdempotencyConfig
from consumer.keys import make_key, payload_hash
from persistence import IdempotencyError, IdempotencyRecord, ItemTooLargeError, PersistenceLayer, RecordStatus

if TYPE_CHECKING:
    from types import TracebackType

    from consumer._context import Clock, LambdaContext

logger = logging.getLogger("idempotent_consumer")


@functools.lru_cache(maxsize=4)
def _default_config(function_name: str | None) -> IdempotencyConfig:  # noqa: ARG001 - the cache key
    return IdempotencyConfig()


_warned_invocation: list[str | None] = []


def idempotency_disabled() -> bool:
    """Whether ``IDEMPOTENCY_DISABLED`` turns every guard into a pass-through (for users' unit tests)."""
    return os.environ.get("IDEMPOTENCY_DISABLED", "").lower() not in ("", "0", "false", "no")


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

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _lock_deadline_ms(self, now_ms: int) -> int:
        if self.context is None:
            return now_ms + self.config.lock_timeout_seconds * 1000
        return now_ms + self.context.get_remaining_time_in_millis() + self.config.lock_grace_ms

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
        cache = self.config.local_cache
        cached = cache.get(self.key, now_ms) if cache is not None else None
        if cached is not None:
            self._replay(cached, validation_hash)
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
            return self
        if existing.status is RecordStatus.COMPLETE:
            self._replay(existing, validation_hash)
        raise IdempotencyAlreadyInProgressError(
            f"{self.key!r} is being processed by another invocation until {existing.in_progress_expires_at} (epoch ms)",
            key=self.key,
            existing_record=existing,
        )

    def _replay(self, record: IdempotencyRecord, validation_hash: str | None) -> NoReturn:
        if self.config.validation_expression is not None and record.payload_hash != validation_hash:
            raise IdempotencyValidationError(
                f"{record.key!r} was processed for a different payload (payload_validation_jmespath "
                f"{self.config.payload_validation_jmespath!r})",
                key=record.key,
                existing_record=record,
            )
        if self.config.local_cache is not None:
            self.config.local_cache.put(record)
        response = None if record.response is None else json.loads(record.response)
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
            LockLostError: We ran past our lock deadline and another invocation took the record over; our
                result is not stored and theirs stands.
            PersistenceLayerError: The store failed while committing.
        """
        held, self._held = self._held, None
        if held is not None:
            if exc is None:
                self._commit(held)
            else:
                self._release(held, exc)
        return False

    def _commit(self, held: IdempotencyRecord) -> None:
        try:
            response: str | None = dumps_result(self.result)
        except (TypeError, ValueError) as e:
            logger.warning("result of %r is not JSON-serializable (%s): committing without it", held.key, e)
            response = None
        complete = held.completed(response, int(self.clock()) + self.config.expires_after_seconds)
        try:
            self.store.complete(complete)
        except ItemTooLargeError as e:
            logger.warning("result of %r is too large to store (%s): committing without it", held.key, e)
            complete = dataclasses.replace(complete, response=None)
            self.store.complete(complete)
        if self.config.local_cache is not None:
            self.config.local_cache.put(complete)

    def _release(self, held: IdempotencyRecord, exc: BaseException) -> None:
        try:
            self.store.release(held.key, held.lease)
        except IdempotencyError as e:
            self.release_error = e
            logger.error("could not release %r after the body raised %r: %s", held.key, exc, e)  # noqa: TRY400
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"idempotent-consumer: releasing {held.key!r} failed as well: {e!r}")
