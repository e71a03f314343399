"""The import rewrite of the drop-in measure: Powertools' import lines become ours; nothing else changes.

``OURS`` says where each Powertools name lives here (and under which name). A name missing from it has no
equivalent: its import is left as it is and fails, which the measure counts. ``STAND_INS`` maps the Powertools
utilities that are not idempotency or batch processing (logging, tracing, validation) to small stand-ins in both
runs: a user moving over keeps Powertools installed for them, and they are not what is measured.
"""

from __future__ import annotations

import ast

_IDEMPOTENCY = "aws_lambda_powertools.utilities.idempotency"
_EXCEPTIONS = (
    "IdempotencyAlreadyInProgressError",
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
)
_BATCH = (
    "AsyncBatchProcessor",
    "BatchProcessor",
    "EventType",
    "SqsFifoPartialProcessor",
    "async_process_partial_response",
    "process_partial_response",
)

#: (Powertools module, name) -> (our module, our name).
OURS: dict[tuple[str, str], tuple[str, str]] = {
    (_IDEMPOTENCY, "DynamoDBPersistenceLayer"): ("persistence", "DynamoDBPersistenceLayer"),
    (f"{_IDEMPOTENCY}.persistence.dynamodb", "DynamoDBPersistenceLayer"): ("persistence", "DynamoDBPersistenceLayer"),
    (f"{_IDEMPOTENCY}.persistence.redis", "RedisCachePersistenceLayer"): ("persistence.redis", "RedisPersistenceLayer"),
    (_IDEMPOTENCY, "IdempotencyConfig"): ("consumer", "IdempotencyConfig"),
    (_IDEMPOTENCY, "idempotent"): ("consumer", "idempotent"),
    (_IDEMPOTENCY, "idempotent_function"): ("consumer", "idempotent_function"),
    (_IDEMPOTENCY, "IdempotentHookFunction"): ("consumer", "ResponseHook"),
    (f"{_IDEMPOTENCY}.persistence.base", "DataRecord"): ("persistence", "IdempotencyRecord"),
    (f"{_IDEMPOTENCY}.persistence.datarecord", "DataRecord"): ("persistence", "IdempotencyRecord"),
    **{(f"{_IDEMPOTENCY}.exceptions", name): ("consumer", name) for name in _EXCEPTIONS},
    **{("aws_lambda_powertools.utilities.batch", name): ("consumer", name) for name in _BATCH},
    ("aws_lambda_powertools.utilities.data_classes.sqs_event", "SQSRecord"): ("consumer", "SQSRecord"),
    ("aws_lambda_powertools.utilities.data_classes.kinesis_stream_event", "KinesisStreamRecord"): (
        "consumer",
        "KinesisRecord",
    ),
    ("aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event", "DynamoDBRecord"): (
        "consumer",
        "DynamoDBStreamRecord",
    ),
    ("aws_lambda_powertools.utilities.typing", "LambdaContext"): ("consumer", "LambdaContext"),
    ("aws_lambda_powertools.utilities.parser", "BaseModel"): ("pydantic", "BaseModel"),
}

#: Names Powertools documents that have no equivalent here, and why (the migration guide says the same).
NO_EQUIVALENT = {
    (_IDEMPOTENCY, "BasePersistenceLayer"): "a store implements acquire/complete/release (PersistenceLayer)",
}

STAND_INS: dict[tuple[str, str], tuple[str, str]] = {
    ("aws_lambda_powertools", "Logger"): ("standins", "Logger"),
    ("aws_lambda_powertools", "Tracer"): ("standins", "Tracer"),
    ("aws_lambda_powertools.utilities.validation", "validator"): ("standins", "validator"),
    ("aws_lambda_powertools.utilities.validation", "envelopes"): ("standins", "envelopes"),
}


def rewrite(source: str, mapping: dict[tuple[str, str], tuple[str, str]]) -> str:
    """``source`` with every ``from aws_lambda_powertools... import ...`` line rewritten by ``mapping``.

    Names the mapping does not know keep their Powertools import. Only the lines of those import statements
    change; every other line stays where it was (a rewritten import is kept on its first line, padded).
    """
    lines = source.splitlines(keepends=True)
    for node in sorted(ast.walk(ast.parse(source)), key=lambda n: -getattr(n, "lineno", 0)):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("aws_lambda_powertools"):
            continue
        module = node.module or ""
        kept: list[str] = []
        by_target: dict[str, list[str]] = {}
        for alias in node.names:
            as_name = alias.asname or alias.name
            target = mapping.get((module, alias.name))
            if target is None:
                kept.append(alias.name if alias.asname is None else f"{alias.name} as {alias.asname}")
                continue
            our_module, our_name = target
            by_target.setdefault(our_module, []).append(our_name if our_name == as_name else f"{our_name} as {as_name}")
        statements = [f"from {m} import {', '.join(names)}" for m, names in by_target.items()]
        if kept:
            statements.append(f"from {module} import {', '.join(kept)}")
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        lines[first : last + 1] = ["; ".join(statements) + "\n"] + ["\n"] * (last - first)
    return "".join(lines)
