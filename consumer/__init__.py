"""What runs records: the guard, its configuration, key selection and the decorators.

This package's own modules are the core every record runs (docs/architecture.md): the guard and what it reports,
the config, keys, the invocation context, errors, the result codec and the decorators. Its features live in wings,
its subpackages: ``batch``, ``sources``, ``serialization``, ``observability``, ``powertools``, ``cli``. Wings import
the core; the core imports no wing but lazily, where a user's data asks for one (a typed result, a ``header()``
key, a record without a key). This module is the public face: it re-exports every public name, the wings' included.

Examples:
    >>> from consumer import IdempotencyGuard, IdempotencyConfig, AlreadyProcessed
    >>> from persistence import InMemoryPersistenceLayer
    >>> store, config = InMemoryPersistenceLayer(), IdempotencyConfig(event_key_jmespath="messageId")
    >>> with IdempotencyGuard({"messageId": "m-1"}, store=store, config=config) as guard:
    ...     guard.result = "charged"
"""

from typing import TYPE_CHECKING

from consumer._shadowing import refuse_shadowed

# Before anything below imports persistence: a user's own persistence.py would run in its place.
refuse_shadowed("persistence")
# ruff: noqa: E402 - the imports below come after that check on purpose

from consumer._context import (
    Clock,
    LambdaContext,
    current_guard,
    current_idempotency_key,
    current_lambda_context,
    register_lambda_context,
)
from consumer._errors import (
    AlreadyProcessed,
    DataArgumentError,
    DecodeLimitError,
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
    ResponseDecodeError,
)
from consumer._output import HookRecord
from consumer._reports import idempotency_disabled
from consumer._serde import canonical_json
from consumer.batch import (
    BatchEvent,
    BatchEventError,
    BatchProcessingError,
    BatchProcessor,
    PartialBatchResponse,
    SqsFifoPartialProcessor,
    UnexpectedBatchTypeError,
    process_partial_response,
)
from consumer.batch._record_model import RecordModelError
from consumer.config import IdempotencyConfig, ResponseHook
from consumer.guard import IdempotencyGuard
from consumer.keys import DEFAULT_KEY_EXPRESSIONS, make_key
from consumer.observability import Item, Outcome
from consumer.sources import EventType, SQSRecord
from persistence import (
    IdempotencyError,
    ItemTooLargeError,
    LockLostError,
    PersistenceLayerError,
    WriteConditionError,
)
from persistence._shadowing import imported_on_first_use

if TYPE_CHECKING:
    from consumer.batch._async_batch import AsyncBatchProcessor, async_process_partial_response
    from consumer.batch._decorators import async_batch_processor, batch_processor
    from consumer.batch._summary import BatchSummary
    from consumer.decorators import idempotent, idempotent_function
    from consumer.observability.metrics import Metrics
    from consumer.powertools import PowertoolsCutover
    from consumer.sources._kafka import KafkaHeaders, KafkaRecord
    from consumer.sources._streams import DynamoDBStreamRecord, KinesisRecord

#: Public names whose modules are imported when a name is first used, not with the package (PEP 562): a batch
#: function's cold start does not pay for the async processor, the Powertools cut-over, the stream and Kafka records,
#: Powertools' older batch decorators, the decorators of single functions, nor the metrics' configuration (EMF
#: metrics are off by default: ``consumer.observability`` imports that module only when a processor turns them on).
_IMPORTED_ON_FIRST_USE = {
    "BatchSummary": "consumer.batch._summary",
    "KinesisRecord": "consumer.sources._streams",
    "DynamoDBStreamRecord": "consumer.sources._streams",
    "KafkaHeaders": "consumer.sources._kafka",
    "KafkaRecord": "consumer.sources._kafka",
    "AsyncBatchProcessor": "consumer.batch._async_batch",
    "async_process_partial_response": "consumer.batch._async_batch",
    "PowertoolsCutover": "consumer.powertools",
    "batch_processor": "consumer.batch._decorators",
    "async_batch_processor": "consumer.batch._decorators",
    "idempotent": "consumer.decorators",
    "idempotent_function": "consumer.decorators",
    "Metrics": "consumer.observability.metrics",
}

__getattr__, __dir__ = imported_on_first_use(globals(), _IMPORTED_ON_FIRST_USE)


#: The distribution's version. The only place it is written: pyproject.toml reads it from here (setuptools parses
#: this line without importing the package), so ``importlib.metadata.version("idempotent-consumer")`` agrees.
__version__ = "0.1.0"

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
    "DataArgumentError",
    "DecodeLimitError",
    "DynamoDBStreamRecord",
    "EventType",
    "HookRecord",
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
    "Item",
    "ItemTooLargeError",
    "KafkaHeaders",
    "KafkaRecord",
    "KinesisRecord",
    "LambdaContext",
    "LockLostError",
    "Metrics",
    "NestedReplayError",
    "Outcome",
    "PartialBatchResponse",
    "PersistenceLayerError",
    "PowertoolsCutover",
    "RecordModelError",
    "ResponseDecodeError",
    "ResponseHook",
    "SQSRecord",
    "SqsFifoPartialProcessor",
    "UnexpectedBatchTypeError",
    "WriteConditionError",
    "async_batch_processor",
    "async_process_partial_response",
    "batch_processor",
    "canonical_json",
    "current_guard",
    "current_idempotency_key",
    "current_lambda_context",
    "idempotency_disabled",
    "idempotent",
    "idempotent_function",
    "make_key",
    "process_partial_response",
    "register_lambda_context",
]
