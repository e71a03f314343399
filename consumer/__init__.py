"""What runs records: the guard, its configuration, key selection and the decorators.

Example:
    >>> from consumer import IdempotencyGuard, IdempotencyConfig, AlreadyProcessed
    >>> from persistence import InMemoryPersistenceLayer
    >>> store, config = InMemoryPersistenceLayer(), IdempotencyConfig(event_key_jmespath="messageId")
    >>> with IdempotencyGuard({"messageId": "m-1"}, store=store, config=config) as guard:
    ...     guard.result = "charged"
"""

from consumer._batch_run import Outcome
from consumer._context import (
    Clock,
    LambdaContext,
    current_idempotency_key,
    current_lambda_context,
    register_lambda_context,
)
from consumer._errors import (
    AlreadyProcessed,
    IdempotencyAlreadyInProgressError,
    IdempotencyConfigError,
    IdempotencyInconsistentStateError,
    IdempotencyInvalidStatusError,
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
    IdempotencyKeyError,
    IdempotencyModelTypeError,
    IdempotencyNoSerializationModelError,
    IdempotencyPersistenceConfigError,
    IdempotencyPersistenceConnectionError,
    IdempotencyPersistenceConsistencyError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
    InvalidResultError,
    NestedReplayError,
)
from consumer._serde import canonical_json
from consumer._unguarded import idempotency_disabled
from consumer.async_batch import AsyncBatchProcessor, async_process_partial_response
from consumer.batch import (
    BatchEvent,
    BatchEventError,
    BatchProcessingError,
    BatchProcessor,
    BatchSummary,
    PartialBatchResponse,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from consumer.config import IdempotencyConfig, ResponseHook
from consumer.decorators import idempotent, idempotent_function
from consumer.event_sources import DynamoDBStreamRecord, EventType, KinesisRecord, SQSRecord
from consumer.guard import IdempotencyGuard
from consumer.keys import DEFAULT_KEY_EXPRESSIONS, make_key
from persistence import IdempotencyError, ItemTooLargeError, LockLostError, PersistenceLayerError

__all__ = [
    "DEFAULT_KEY_EXPRESSIONS",
    "AlreadyProcessed",
    "AsyncBatchProcessor",
    "BatchEvent",
    "BatchEventError",
    "BatchProcessingError",
    "BatchProcessor",
    "BatchSummary",
    "Clock",
    "DynamoDBStreamRecord",
    "EventType",
    "IdempotencyAlreadyInProgressError",
    "IdempotencyConfig",
    "IdempotencyConfigError",
    "IdempotencyError",
    "IdempotencyGuard",
    "IdempotencyInconsistentStateError",
    "IdempotencyInvalidStatusError",
    "IdempotencyItemAlreadyExistsError",
    "IdempotencyItemNotFoundError",
    "IdempotencyKeyError",
    "IdempotencyModelTypeError",
    "IdempotencyNoSerializationModelError",
    "IdempotencyPersistenceConfigError",
    "IdempotencyPersistenceConnectionError",
    "IdempotencyPersistenceConsistencyError",
    "IdempotencyPersistenceLayerError",
    "IdempotencyValidationError",
    "InvalidResultError",
    "ItemTooLargeError",
    "KinesisRecord",
    "LambdaContext",
    "LockLostError",
    "NestedReplayError",
    "Outcome",
    "PartialBatchResponse",
    "PersistenceLayerError",
    "ResponseHook",
    "SQSRecord",
    "SqsFifoPartialProcessor",
    "async_process_partial_response",
    "canonical_json",
    "current_idempotency_key",
    "current_lambda_context",
    "idempotency_disabled",
    "idempotent",
    "idempotent_function",
    "make_key",
    "process_partial_response",
    "register_lambda_context",
]
