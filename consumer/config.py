"""What a guard does: which part of the record is the key, how long records live, how locks expire.

And the local cache a config keeps: thread-safe LRUs of COMPLETE records, one per store, so a warm duplicate costs
no request.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import operator
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import jmespath.exceptions

from consumer._context import register_invocation_context
from consumer._errors import IdempotencyConfigError
from consumer._jmespath import DEFAULT_MAX_DECODED_BYTES, compile_expression, options, undefined_function
from persistence._cache import LocalCache, LocalCaches
from persistence._fields import ByFields

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jmespath.parser import ParsedResult

    from consumer._context import LambdaContext
    from consumer._output import HookRecord
    from consumer.powertools import PowertoolsCutover


class ResponseHook(Protocol):
    """Called on a replayed response: ``hook(response, record) -> response``.

    ``record`` is a :class:`~consumer.HookRecord`: the replayed record, which also reads by Powertools' ``DataRecord``
    names. A hook typed with ``IdempotencyRecord`` still fits (it asks for less).
    """

    def __call__(self, response: Any, record: HookRecord) -> Any:
        """Return the response to hand back for a duplicate."""
        ...


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # shown, compared, hashed: ByFields
class IdempotencyConfig(ByFields):
    """How records are keyed, how long they count and how locks expire. Validated on construction.

    Attributes:
        event_key_jmespath: Selects the key from the record. ``None``: the record's own id (SQS
            ``messageId``, Kinesis / DynamoDB Streams ``eventID``, EventBridge ``id``), else the whole record.
            ``""``: the whole record, always (what Powertools means by it; an SQS record then counts as new on
            every delivery, since its receive count and receipt handle change).
        payload_validation_jmespath: Selects the part of the payload that must match between a record and
            its duplicates; a mismatch raises ``IdempotencyValidationError``. ``""`` is ``None`` (no validation),
            as in Powertools.
        raise_on_no_idempotency_key: When the selection is empty, raise ``IdempotencyKeyError`` (the default; in a
            batch the record is reported in ``batchItemFailures``), naming the expression, the record by its id,
            and the fix when the selection went into JSON text (``powertools_json(body).order_id``). The body does
            not run. ``False`` is Powertools' default: the record runs unguarded, with a warning saying the same.
        expires_after_seconds: How long a completed record counts.
        use_local_cache: Keep completed records in an in-process LRU (one per store), so a duplicate costs
            no request.
        local_cache_max_items: Size of each LRU.
        local_cache_max_age_seconds: How long a cached record is trusted before the store is asked again:
            the bound on how long a warm process keeps replaying a record after an operator deleted it.
        hash_function: Any fixed-length :mod:`hashlib` algorithm available here (``sha256``, ``blake2b``,
            ``sha512_256``, ...); variable-length digests (``shake_128``) are refused.
        key_prefix: Prefix of every key; defaults to ``AWS_LAMBDA_FUNCTION_NAME`` (read when the config is
            built: Lambda sets it before your module loads), else ``"local"``. Set, it is used exactly, by
            ``@idempotent_function`` too (which otherwise adds the function's module and name to the default).
        lock_timeout_seconds: Lock lifetime when there is no Lambda context.
        lock_grace_ms: Added to the Lambda deadline before a lock may be taken over.
        response_hook: Applied to a replayed response.
        powertools_cutover: While moving over from Powertools: read its table through for records our store does
            not know yet, until a given date (see :class:`consumer.PowertoolsCutover`).
        key_header: A producer-set key, by name (``"Idempotency-Key"``, its ASCII letters in any case): a Kafka
            header (its UTF-8 text; a value that is not UTF-8 keys as its bytes, unlike any text), an SQS message
            attribute's ``stringValue``, an EventBridge event's ``detail`` field. The same
            as ``event_key_jmespath="header(@, 'Idempotency-Key')"`` (the JMESPath function composes: ``header(@,
            'Idempotency-Key') || messageId`` falls back to the message id); so not both. A record without it
            fails, as any missing selection does; with ``raise_on_no_idempotency_key=False`` it is keyed by its own
            id instead (as without ``key_header``), so a redelivery still replays. Kinesis and DynamoDB Streams
            processors refuse it.
        max_decoded_bytes: The most the decoding functions of one evaluation of the key or validation expression
            (or the Powertools cut-over's) produce from one record, all of its calls together (default 6 MiB,
            Lambda's payload limit): ``base64_gzip_decode`` calls inflate and base64 decoding produces at most that
            many bytes in all; ``json_parse`` calls read at most that many characters in all, with at most one
            ``{``, ``[``, ``:`` or ``,`` per 16 of them. Past it, the record fails alone with a
            ``DecodeLimitError`` (an ``IdempotencyKeyError``) naming the function, the limit and the record.
        jmespath_options: Powertools' ``jmespath_options``: keyword arguments of :class:`jmespath.Options`, used by
            both expressions instead of ours, as Powertools uses them instead of its own. Its
            ``{"custom_functions": CustomFunctions()}`` replaces the built-in functions (``powertools_json`` and the
            others, ``header``): subclass ``jmespath.functions.Functions`` and add yours (an expression calling a
            function they do not define is refused here). Functions given here are
            the user's and are not bounded by ``max_decoded_bytes``. Not with ``key_header``. Empty (``{}``): ours,
            as Powertools takes it.
        lambda_context: Powertools' ``lambda_context=``: registered as this invocation's context when the config
            is built, as :meth:`register_lambda_context` registers it (the invocation's, not this config's: it is
            not kept on the config, so a copy made later with :func:`dataclasses.replace` registers nothing).
        prefix: The key prefix in force (derived: ``key_prefix``, else the function name, else ``"local"``).

    Shown, compared and hashed by its fields as a dataclass is, by methods written once (``ByFields``) rather than
    generated: a dataclass compiles the methods it generates when its module is imported, on every cold start.

    Examples:
        >>> IdempotencyConfig(event_key_jmespath="powertools_json(body).order_id").expires_after_seconds
        3600
    """

    event_key_jmespath: str | None = None
    payload_validation_jmespath: str | None = None
    raise_on_no_idempotency_key: bool = True
    expires_after_seconds: int = 3600
    use_local_cache: bool = False
    local_cache_max_items: int = 256
    local_cache_max_age_seconds: int = 60
    hash_function: str = "sha256"
    key_prefix: str | None = None
    lock_timeout_seconds: int = 60
    lock_grace_ms: int = 1000
    response_hook: ResponseHook | None = None
    powertools_cutover: PowertoolsCutover | None = None
    key_header: str | None = None
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
    jmespath_options: Mapping[str, Any] | None = field(default=None, compare=False)
    lambda_context: LambdaContext | None = field(default=None, repr=False, compare=False)
    key_expression: ParsedResult | None = field(init=False, repr=False, compare=False, default=None)
    validation_expression: ParsedResult | None = field(init=False, repr=False, compare=False, default=None)
    local_caches: LocalCaches | None = field(init=False, repr=False, compare=False, default=None)
    prefix: str = field(init=False, repr=False, compare=False, default="local")
    search_options: jmespath.Options = field(
        init=False, repr=False, compare=False, default=options(DEFAULT_MAX_DECODED_BYTES)
    )

    def __post_init__(self) -> None:
        """Validate every field and compile the expressions once."""
        for name, least, most in _COUNTS:
            object.__setattr__(self, name, _whole(name, getattr(self, name), least, most))
        _check_hash_function(self.hash_function)
        if self.response_hook is not None:
            _check_response_hook(self.response_hook)
        _require(self.key_prefix != "", "key_prefix must not be empty (use None for the default)")
        object.__setattr__(self, "key_expression", _compile("event_key_jmespath", self._key_jmespath()))
        validation = _compile("payload_validation_jmespath", self.payload_validation_jmespath or None)
        object.__setattr__(self, "validation_expression", validation)
        object.__setattr__(self, "search_options", self._search_options())
        if self.use_local_cache:
            caches = LocalCaches(self.local_cache_max_items, self.local_cache_max_age_seconds * 1000)
            object.__setattr__(self, "local_caches", caches)
        prefix = self.key_prefix or os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or "local"
        object.__setattr__(self, "prefix", prefix)
        if self.lambda_context is not None:
            register_invocation_context(self.lambda_context)
            object.__setattr__(self, "lambda_context", None)

    def _search_options(self) -> jmespath.Options:
        if not self.jmespath_options:  # {} too: Powertools' "use the defaults"
            return options(self.max_decoded_bytes)
        _require(
            self.key_header is None,
            "key_header selects with the header() function, which jmespath_options replaces: give one of them",
        )
        try:
            given = jmespath.Options(**self.jmespath_options)
        except TypeError as e:
            raise IdempotencyConfigError(f"jmespath_options are not jmespath.Options arguments: {e}") from e
        for name, expression in (("event_key_jmespath", self.key_expression),
                                 ("payload_validation_jmespath", self.validation_expression)):  # fmt: skip
            missing = None if expression is None else undefined_function(expression, given.custom_functions)
            _require(
                missing is None,
                f"{name} {getattr(expression, 'expression', None)!r} calls {missing}(), which its jmespath_options do "
                "not define: they replace the built-in functions (powertools_json and the others), as in Powertools; "
                "define it in your custom_functions (every record would fail)",
            )
        return given

    def register_lambda_context(self, lambda_context: LambdaContext | None) -> None:
        """Powertools' name for registering this invocation's Lambda context; call it first in each invocation.

        An alias of :func:`consumer.register_lambda_context` for code written for Powertools: guards outside a
        batch or ``@idempotent`` (an ``@idempotent_function`` called from a plain handler) take their lock deadline
        from this context. It is the invocation's, not this config's: every guard sees it, whatever its config.
        Each call replaces the context registered before (nothing piles up on a warm container), and a context
        left from an earlier invocation never counts once the next invocation's context reached the library (a
        batch, ``@idempotent``, another registration) or its own deadline passed: the lock then lasts
        ``lock_timeout_seconds``. A batch, ``@idempotent`` or ``with register_lambda_context(...)`` uses its own
        context for the length of its call.

        Args:
            lambda_context: The handler's ``context`` argument.
        """
        register_invocation_context(lambda_context)

    def _key_jmespath(self) -> str | None:
        if self.key_header is None:
            return self.event_key_jmespath or None  # "" is Powertools' "the whole event", as None is here
        _require(
            not self.event_key_jmespath,
            "key_header and event_key_jmespath both select the key: give one (header(@, 'name') in an expression)",
        )
        _require(
            isinstance(self.key_header, str) and self.key_header.strip() == self.key_header != "",
            f"key_header must be a header name (no surrounding spaces), got {self.key_header!r}",
        )
        literal = json.dumps(self.key_header).replace("`", "\\`")  # a JMESPath JSON literal
        return f"header(@, `{literal}`)"

    def cache_for(self, store: object) -> LocalCache | None:
        """The local cache of ``store`` (``None`` without ``use_local_cache``)."""
        return None if self.local_caches is None else self.local_caches.for_store(store)


def _check_hash_function(name: str) -> None:
    try:
        digest_size = hashlib.new(name).digest_size
    except (ValueError, TypeError) as e:
        available = sorted(hashlib.algorithms_available)
        raise IdempotencyConfigError(f"hash_function {name!r} is not available here (one of {available})") from e
    # shake_128 / shake_256 report 0 and need a length for every digest: keys must have one fixed length.
    _require(digest_size > 0, f"hash_function {name!r} is not a fixed-length digest")
    if name.lower() in _COLLIDING:
        with _warned_lock:
            if name.lower() in _warned:
                return
            _warned.add(name.lower())
        logger.warning(
            "hash_function %r: collisions of it can be made on purpose, so a producer who controls what a key "
            "selects can give two records one key (the second replays the first's result); use sha256",
            name,
        )


logger = logging.getLogger("idempotent_consumer")
#: Digests whose collisions can be computed: warned of once per process and name (the Powertools cut-over hashes
#: Powertools' keys with its md5 apart from this config, to find its records, and warns of nothing).
#: The longest duration an option may name: 100 years. Stores keep deadlines as whole milliseconds since the epoch
#: in 64-bit integers (SQLite's INTEGER, Redis's PX); a longer one would fail every record at the store.
MAX_SECONDS = 100 * 365 * 24 * 3600
#: The options that are whole numbers, with their least and greatest values (``None``: no bound).
_COUNTS = (
    ("expires_after_seconds", 1, MAX_SECONDS),
    ("local_cache_max_items", 1, None),
    ("local_cache_max_age_seconds", 1, MAX_SECONDS),
    ("lock_timeout_seconds", 1, MAX_SECONDS),
    ("max_decoded_bytes", 1, None),
    ("lock_grace_ms", 0, MAX_SECONDS * 1000),  # milliseconds
)

_COLLIDING = frozenset(("md4", "md5", "md5-sha1", "sha1"))
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _whole(name: str, value: object, least: int, most: int | None) -> int:
    """``value`` as an int: an integer, or a float with no fraction (``timedelta(hours=1).total_seconds()``), from
    ``least`` to ``most``.

    Stores write these options into timestamps, which they keep and read back as whole numbers: a float expiry
    written to DynamoDB or Redis would fail every duplicate that reads it back, instead of replaying it.

    Raises:
        IdempotencyConfigError: Anything else: a fraction, a ``bool``, text, or a number out of bounds.
    """  # noqa: D205 - one sentence
    number = None
    if not isinstance(value, bool):
        if isinstance(value, float) and value.is_integer():
            number = int(value)
        with contextlib.suppress(TypeError):
            number = operator.index(value)  # type: ignore[arg-type]  # what has no __index__ raises TypeError
    if number is None:
        raise IdempotencyConfigError(f"{name} must be a whole number, got {value!r}")
    _require(number >= least, f"{name} must {'be positive' if least else 'not be negative'}, got {value!r}")
    _require(most is None or number <= most, f"{name} must be at most {most} (100 years), got {value!r}")
    return number


def _check_response_hook(hook: object) -> None:
    """Refuse a hook that cannot be called as ``hook(response, record)`` for the replay's value.

    An ``async def`` hook would make every replay its coroutine, never awaited (guards call the hook in sync and async
    code alike).
    """
    _require(callable(hook), f"response_hook must be a function hook(response, record), got {hook!r}")
    from consumer._handlers import is_async  # noqa: PLC0415 - its inspect costs 6 ms: only for a config with a hook

    _require(
        not is_async(hook),  # type: ignore[arg-type]  # callable, checked above
        f"response_hook {getattr(hook, '__qualname__', hook)!r} is async def: it is called as hook(response, "
        "record) when a duplicate replays, in sync and async code alike, and what it returns is the replay (a "
        "coroutine, never awaited); make it a plain def",
    )


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise IdempotencyConfigError(message)


def _compile(name: str, expression: str | None) -> ParsedResult | None:
    if expression is None:
        return None
    try:
        return compile_expression(expression)
    except jmespath.exceptions.JMESPathError as e:
        raise IdempotencyConfigError(f"{name} {expression!r} is not valid JMESPath: {e}") from e


def lock_deadline_ms(
    config: IdempotencyConfig, context: LambdaContext | None, now_ms: int, remaining: int | None = None
) -> int:
    """When a lock taken at ``now_ms`` expires: the invocation's deadline plus the grace, else the lock timeout.

    ``remaining``: the context's remaining time when the caller read it an instant before (a batch processor, for the
    record's deadline-margin check): the deadline it gives is then an instant later than a read now, never earlier.
    """
    if remaining is None:
        remaining_time = getattr(context, "get_remaining_time_in_millis", None)
        if remaining_time is None:  # no context, or a test's stand-in that knows no deadline
            return now_ms + config.lock_timeout_seconds * 1000
        remaining = remaining_time()
    if remaining < 0:  # noqa: PLR1730 - max() is a call, several times this test's cost (per record)
        remaining = 0  # never negative: a lock already expired when taken
    # A whole number of ms, as stores keep it: a stand-in context's float (30000.0) would not read back from DynamoDB.
    return int(now_ms + remaining + config.lock_grace_ms)


def function_config() -> IdempotencyConfig:
    """The config of a guard given none: the function's (``AWS_LAMBDA_FUNCTION_NAME``, its key prefix)."""
    return default_config(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


@functools.lru_cache(maxsize=4)
def default_config(function_name: str | None) -> IdempotencyConfig:  # noqa: ARG001 - the cache key
    """The config of a guard given none: one per function name (``AWS_LAMBDA_FUNCTION_NAME``, the key prefix)."""
    return IdempotencyConfig()
