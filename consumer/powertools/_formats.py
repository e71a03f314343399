"""What Powertools for AWS Lambda (Python) 3.x writes, as ``consumer.powertools`` needs it to find a record again.

- Key: ``"{prefix}#{hexdigest}"``. ``prefix`` is the decorator's ``key_prefix`` when given, else
  ``"{lambda}.{module}.{qualname}"``: ``AWS_LAMBDA_FUNCTION_NAME`` (``"test-func"`` when unset) and the decorated
  function (the handler under ``@idempotent``, the function itself under ``@idempotent_function``).
- Hexdigest: ``getattr(hashlib, hash_function)`` (``md5`` by default) over ``json.dumps(selection,
  sort_keys=True)`` (default separators, ASCII escapes), ``selection`` being the ``event_key_jmespath`` result on
  the payload, with the ``powertools_*`` JMESPath functions (all of the payload for ``""``, the default). A
  selection that is empty, or only ``None`` values, has no key: no record is written.
- Payload: the event; under ``@idempotent_function``, the data argument in plain form (a dataclass's ``asdict``,
  a Pydantic model's ``model_dump(mode="json")``, a data class's raw event). A batch record handler's data
  class (``SQSRecord``, ``KinesisStreamRecord``, ``DynamoDBRecord``, ``KafkaEventRecord``) is hashed as the raw
  record exactly as the event carries it: a Kafka record without its event's ``eventSource`` or cluster.
- Item (its ``DynamoDBPersistenceLayer``): the key under ``id`` (or under ``sort_key_attr``, the partition key
  holding ``"idempotency#{AWS_LAMBDA_FUNCTION_NAME}"``); ``status`` ``INPROGRESS`` or ``COMPLETED``;
  ``expiration`` in epoch seconds, expired once the current second is past it; ``in_progress_expiration`` in
  epoch milliseconds (absent without a Lambda context: the lock then lasts until the expiry); ``data``, the
  response's JSON text; ``validation``, the payload-validation hash (same hash, over that selection).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import hashlib
import json
import logging
import math
import uuid
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import jmespath
from jmespath import functions

from consumer._errors import IdempotencyConfigError
from consumer._jmespath import BoundedFunctions, decode_base64, inflate, parse_json, undefined_function
from consumer._serde import encode_result
from consumer.sources import as_delivered

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from jmespath.parser import ParsedResult

COMPLETED = "COMPLETED"
INPROGRESS = "INPROGRESS"


class PowertoolsFunctions(BoundedFunctions, functions.Functions):
    # The functions Powertools lets key expressions use, decoding base64 as leniently as it does; bounded as ours
    # are, one budget per evaluation (the cut-over reads the same producers' records), failing as Powertools' do
    # within the bound.

    @functions.signature({"types": ["string"]})
    def _func_powertools_json(self, value: str) -> Any:
        return parse_json(value, self.budget, "powertools_json")

    @functions.signature({"types": ["string"]})
    def _func_powertools_base64(self, value: str) -> str:
        return decode_base64(value, self.budget, "powertools_base64", validate=False).decode()

    @functions.signature({"types": ["string"]})
    def _func_powertools_base64_gzip(self, value: str) -> str:
        data = decode_base64(value, self.budget, "powertools_base64_gzip", validate=False)
        return inflate(data, self.budget, "powertools_base64_gzip").decode()


@functools.cache
def powertools_options(limit: int) -> jmespath.Options:
    """Powertools' default JMESPath options, its functions decoding at most ``limit`` bytes.

    Searched with :func:`consumer._jmespath.search`, which gives each evaluation that decodes a budget of its own.
    """
    return jmespath.Options(custom_functions=PowertoolsFunctions(limit))


#: Errors of the cut-over's JMESPath options, not of a payload: a record meeting one fails, unrun.
MISCONFIGURED = (jmespath.exceptions.UnknownFunctionError, jmespath.exceptions.ArityError)


def given_options(given: Mapping[str, Any] | None, **expressions: ParsedResult | None) -> jmespath.Options | None:
    """The :class:`jmespath.Options` of a cut-over's ``jmespath_options`` (``None``: Powertools' own functions).

    Each of ``expressions`` (by option name) must call only functions they define; functions resolved only when
    called (``custom_functions`` without a function table) are not checked.

    Raises:
        IdempotencyConfigError: ``given`` are not :class:`jmespath.Options` arguments, or an expression calls a
            function they do not define (the error names both).
    """
    try:
        options = jmespath.Options(**given) if given else None
    except TypeError as e:
        raise IdempotencyConfigError(f"jmespath_options are not jmespath.Options arguments: {e}") from e
    custom = PowertoolsFunctions if options is None else options.custom_functions
    for name, expression in expressions.items():
        missing = None if expression is None else undefined_function(expression, custom)
        if expression is not None and missing is not None:
            whose = "Powertools' own functions" if options is None else "its jmespath_options"
            msg = (
                f"the Powertools cut-over's {name} {expression.expression!r} calls {missing}(), which "
                f"{whose} do not define: give PowertoolsCutover the jmespath_options Powertools keyed with "
                "(it does not take the IdempotencyConfig's)"
            )
            raise IdempotencyConfigError(msg)
    return options


def check_options(table_name: str, payload: Callable[[Any], Any] | None) -> None:
    """Refuse a cut-over's empty ``table_name``, and a ``payload=`` that is not a plain function (hashed at once).

    Raises:
        IdempotencyConfigError: The table name is empty; the payload is not callable, or is ``async def`` (its
            coroutine would select no key, and every record would run as one Powertools never kept).
    """
    if not table_name:
        raise IdempotencyConfigError("table_name must not be empty")
    from consumer._handlers import is_async  # noqa: PLC0415 - inspect, for a cut-over with payload= only

    if payload is not None and (not callable(payload) or is_async(payload)):
        msg = (
            f"payload must be a plain function of what the guard receives, got {payload!r}: its result is hashed at "
            "once (a coroutine would select no key, and every record would run as one Powertools never kept)"
        )
        raise IdempotencyConfigError(msg)


def _hash_default(value: Any) -> Any:
    """The JSON form Powertools' key encoder gives a value that JSON has no form for."""
    if isinstance(value, decimal.Decimal):
        return math.nan if value.is_nan() else str(value)
    if getattr(value, "json", False) and callable(getattr(value, "model_dump", None)):  # a Pydantic model
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, PurePath)):
        return str(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def powertools_payload(data: Any) -> Any:
    """What Powertools hashed for ``data``: its plain form, as Powertools prepares a decorated function's payload.

    A batch record (a processor's, or one of our typed records standing for the Powertools data class the record
    handler received) is the raw record as its event carries it: a Kafka record without the event fields our
    parser adds to it. Otherwise a dataclass's ``asdict``, a Pydantic model's ``model_dump(mode="json")``, an
    object's ``dict()`` or ``raw_event``, or ``data`` itself.
    """
    if getattr(type(data), "__keyed_by_raw__", False):
        return as_delivered(data.raw)
    if isinstance(data, dict):
        return as_delivered(data)
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.asdict(data)
    for method, kwargs in (("model_dump", {"mode": "json"}), ("dict", {})):
        if not isinstance(data, dict) and callable(getattr(data, method, None)):
            return getattr(data, method)(**kwargs)
    return getattr(data, "raw_event", data)


def is_missing(selection: Any) -> bool:
    """Whether Powertools finds no key in ``selection`` (then it keeps no record for the payload)."""
    if isinstance(selection, dict):
        return all(value is None for value in selection.values())
    if isinstance(selection, (list, tuple)):
        return all(value is None for value in selection)
    if isinstance(selection, (int, float)):  # bool included
        return False
    return not selection


def hasher(name: str) -> Callable[[bytes], Any]:
    """The :mod:`hashlib` constructor Powertools finds under ``name`` (``getattr(hashlib, name)``)."""
    constructor: Any = getattr(hashlib, name, None)
    try:
        fixed_length = constructor().digest_size > 0  # shake_* have no fixed length; new() & co need arguments
    except (TypeError, ValueError) as e:
        raise IdempotencyConfigError(f"hash_function {name!r} is not a hashlib hash") from e
    if not fixed_length:
        raise IdempotencyConfigError(f"hash_function {name!r} is not a fixed-length digest")
    return constructor  # type: ignore[no-any-return]


def digest(value: Any, hash_constructor: Callable[[bytes], Any]) -> str:
    """Powertools' hash of a key selection (or a payload-validation selection)."""
    text = json.dumps(value, sort_keys=True, default=_hash_default)
    hexdigest: str = hash_constructor(text.encode()).hexdigest()
    return hexdigest


def stored_response(key: str, value: Any) -> str | None:
    """Our encoding of the response Powertools stored (its JSON text); ``None`` when there is none to replay."""
    text = value.get("S") if isinstance(value, dict) else None
    if not text:
        return None
    try:
        return encode_result(json.loads(text))
    except ValueError as e:  # the body ran: replay without the response rather than run it again
        logging.getLogger("idempotent_consumer").warning(
            "the response of Powertools record %r cannot be replayed (%s): replaying None", key, e
        )
        return None
