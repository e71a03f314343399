"""What the batch processors' signatures are made of, for type checkers (the processors import it for them only).

A record handler of ``RecordT`` records is called ``handler(record)``, ``handler(record, guard)`` or
``handler(record, guard=guard)`` (the processor asks its signature which): :data:`RecordHandler` is the union of
the three, so a lambda gets its record's type, and a handler of another source's records is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypedDict, TypeVar

from consumer.sources import RecordT

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import Clock
    from consumer.batch._report import OutcomeHook
    from consumer.config import IdempotencyConfig
    from consumer.guard import IdempotencyGuard
    from consumer.observability import Metrics
    from consumer.sources import DynamoDBStreamRecord, KinesisRecord, SQSRecord
    from consumer.sources._kafka import KafkaRecord

Record_contra = TypeVar(
    "Record_contra", bound="SQSRecord | KinesisRecord | DynamoDBStreamRecord | KafkaRecord", contravariant=True
)


class KeywordGuardHandler(Protocol[Record_contra]):
    """``def handler(record, *, guard)``: a handler taking the guard by keyword only."""

    def __call__(self, record: Record_contra, /, *, guard: IdempotencyGuard) -> Any:
        """Handle one record."""
        ...


#: A record handler of ``RecordT`` records (an ``async def`` one too, for the async processor).
RecordHandler: TypeAlias = (
    "Callable[[RecordT], Any] | Callable[[RecordT, IdempotencyGuard], Any] | KeywordGuardHandler[RecordT]"
)


class _Options(TypedDict, total=False):
    """The options both processors take after ``event_type`` and ``store``."""

    config: IdempotencyConfig | None
    deadline_margin_ms: int
    stop_on_first_failure: bool
    skip_group_on_error: bool
    raise_on_entire_batch_failure: bool
    clock: Clock
    on_outcome: OutcomeHook | None
    metrics: Metrics | bool | None


class BatchOptions(_Options, total=False):
    """``BatchProcessor``'s options after ``event_type`` and ``store``, as its overloads take them."""

    max_workers: int


class AsyncBatchOptions(_Options, total=False):
    """``AsyncBatchProcessor``'s options after ``event_type`` and ``store``, as its overloads take them."""

    max_concurrency: int
    cancel_at_deadline: bool


__all__ = ["AsyncBatchOptions", "BatchOptions", "KeywordGuardHandler", "RecordHandler", "RecordT"]
