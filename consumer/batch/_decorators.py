"""Powertools' older batch API as thin faces over the processors' run: ``@batch_processor`` and
``@async_batch_processor``.

Each decorated handler processes the invocation's event first (every record in its guard, exactly as
``process_partial_response`` does), then runs the handler, which returns ``processor.response()``. Powertools
deprecated both in its version 3; they are kept here for code written for it, with the same warning.
"""  # noqa: D205 - one sentence

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any, TypeVar, overload

from consumer._handlers import is_async
from consumer.batch import BatchProcessor

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer.batch._async_batch import AsyncBatchProcessor

Handler = TypeVar("Handler", bound="Callable[..., Any]")


def _deprecated(name: str, instead: str) -> None:
    msg = (
        f"The `{name}` decorator is deprecated in V3 of Powertools for AWS Lambda and kept here for code written for "
        f"it: use `{instead}` instead"
    )
    warnings.warn(msg, DeprecationWarning, stacklevel=3)


@overload
def batch_processor(
    *, record_handler: Callable[..., Any], processor: BatchProcessor[Any]
) -> Callable[[Handler], Handler]: ...
@overload
def batch_processor(
    handler: Handler, *, record_handler: Callable[..., Any], processor: BatchProcessor[Any]
) -> Handler: ...
def batch_processor(
    handler: Handler | None = None, *, record_handler: Callable[..., Any], processor: BatchProcessor[Any]
) -> Handler | Callable[[Handler], Handler]:
    """Powertools' ``@batch_processor(record_handler=..., processor=...)``: the batch runs before the handler.

    The handler then returns ``processor.response()``. A ``BatchProcessingError`` (every record failed) is raised
    before the handler runs, as in Powertools. ``process_partial_response`` does the same in one call.

    Raises:
        TypeError: ``processor`` is not a :class:`~consumer.BatchProcessor` (an async one takes
            :func:`async_batch_processor`).

    Examples:
        >>> import warnings
        >>> from consumer import EventType
        >>> from persistence import InMemoryPersistenceLayer
        >>> processor = BatchProcessor(EventType.SQS, store=InMemoryPersistenceLayer())
        >>> @batch_processor(record_handler=lambda record: int(record.body), processor=processor)
        ... def handler(event, context):
        ...     return processor.response()
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     handler({"Records": [{"messageId": "a", "body": "1"}, {"messageId": "b", "body": "x"}]}, None)
        {'batchItemFailures': [{'itemIdentifier': 'b'}]}
    """
    if not isinstance(processor, BatchProcessor):
        msg = f"@batch_processor takes a BatchProcessor, got {type(processor).__name__}: use @async_batch_processor"
        raise TypeError(msg)

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def wrapper(event: Any, context: Any, **kwargs: Any) -> Any:
            _deprecated("batch_processor", "process_partial_response")
            processor.process(event, record_handler, context)
            return handler(event, context, **kwargs)

        return wrapper  # type: ignore[return-value]  # functools.wraps keeps the handler's signature

    return decorate if handler is None else decorate(handler)


@overload
def async_batch_processor(
    *, record_handler: Callable[..., Any], processor: AsyncBatchProcessor[Any]
) -> Callable[[Handler], Handler]: ...
@overload
def async_batch_processor(
    handler: Handler, *, record_handler: Callable[..., Any], processor: AsyncBatchProcessor[Any]
) -> Handler: ...
def async_batch_processor(
    handler: Handler | None = None, *, record_handler: Callable[..., Any], processor: AsyncBatchProcessor[Any]
) -> Handler | Callable[[Handler], Handler]:
    """Powertools' ``@async_batch_processor(record_handler=..., processor=...)``: the async batch, then the handler.

    A plain ``def`` handler (Powertools' form, and a Lambda handler's) runs the batch on a new event loop first;
    an ``async def`` handler stays async and awaits it. ``async_process_partial_response`` does the same in one call.

    Raises:
        TypeError: ``processor`` is not an :class:`~consumer.AsyncBatchProcessor`.
        RuntimeError: A plain ``def`` handler was called in a running event loop, where the batch cannot be run to
            its end without blocking the loop: make the handler ``async def`` (nothing was processed).
    """
    from consumer.batch._async_batch import AsyncBatchProcessor  # noqa: PLC0415 - asyncio costs sync users

    if not isinstance(processor, AsyncBatchProcessor):
        msg = f"@async_batch_processor takes an AsyncBatchProcessor, got {type(processor).__name__}"
        raise TypeError(msg)

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def async_wrapper(event: Any, context: Any, **kwargs: Any) -> Any:
            _deprecated("async_batch_processor", "async_process_partial_response")
            await processor.process(event, record_handler, context)
            return await handler(event, context, **kwargs)

        @functools.wraps(handler)
        def wrapper(event: Any, context: Any, **kwargs: Any) -> Any:
            _deprecated("async_batch_processor", "async_process_partial_response")
            # Refused in a running event loop (nothing is run): the batch could not be run to its end there.
            processor._run_here(  # noqa: SLF001 - one face of it
                lambda: processor.process(event, record_handler, context), "@async_batch_processor", handler
            )
            return handler(event, context, **kwargs)

        return async_wrapper if is_async(handler) else wrapper  # type: ignore[return-value]  # wraps keeps it

    return decorate if handler is None else decorate(handler)
