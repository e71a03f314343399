"""Cut-over from a Powertools for AWS Lambda (Python) idempotency table, without running its records again.

With ``IdempotencyConfig(powertools_cutover=PowertoolsCutover(...))``, a guard that has just taken the lock of a
key our store did not know reads the item Powertools would have written for the same payload, before the body:

- ``COMPLETED``, unexpired: its response replays, the body does not run; our store keeps a ``COMPLETE`` copy (with
  the Powertools expiry), so later deliveries never read the Powertools table;
- ``INPROGRESS`` with a live lock: in progress elsewhere (our lock released, ``IdempotencyAlreadyInProgressError``:
  a batch reports the record failed, to be redelivered);
- absent, expired, or ``INPROGRESS`` past its lock deadline: the body runs, as under Powertools.

One strongly consistent ``GetItem`` per first-time record while the window is open; after ``until`` (by the guard's
clock), one comparison. A failed read fails the record unrun, with our lock released.
The Powertools record format is in ``consumer.powertools._formats``.

The powertools wing owns the cut-over (this module) and Powertools' formats (``_formats``). It may import the core,
``persistence`` and the sources wing (a Kafka record as its event carries it). The guard reaches it through the
config it is given (``config.powertools_cutover``), never by an import: a consumer without a cut-over never loads
it.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from consumer._async import settle, settled
from consumer._errors import DecodeLimitError, IdempotencyConfigError, IdempotencyKeyError, IdempotencyValidationError
from consumer._jmespath import DEFAULT_MAX_DECODED_BYTES, search
from consumer._result import acommit, commit
from consumer.config import _compile, _require
from consumer.keys import failure_said
from consumer.powertools._formats import (
    COMPLETED,
    INPROGRESS,
    MISCONFIGURED,
    check_options,
    digest,
    given_options,
    hasher,
    is_missing,
    powertools_options,
    powertools_payload,
    stored_response,
)
from persistence import (
    DynamoDBPersistenceLayer,
    IdempotencyRecord,
    ItemTooLargeError,
    PersistenceLayerError,
    RecordStatus,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import boto3
    import jmespath
    from botocore.config import Config
    from jmespath.parser import ParsedResult
    from mypy_boto3_dynamodb import DynamoDBClient

    from persistence import AsyncPersistenceLayer, PersistenceLayer

logger = logging.getLogger("idempotent_consumer")


@dataclass(frozen=True, slots=True)
class PowertoolsCutover:
    """Read a Powertools idempotency table through until ``until``, so that moving over runs nothing twice.

    Give it to the config (``IdempotencyConfig(powertools_cutover=...)``): every guard made with that config (the
    batch processors' and the decorators' too) reads through. The table, key and attribute options are those of
    Powertools' ``DynamoDBPersistenceLayer`` and ``IdempotencyConfig``, with the same defaults: copy the values the
    Powertools deployment used. Name the decorated function whose records to find (``function``), unless
    Powertools was given a ``key_prefix``.

    Examples:
        >>> import datetime as dt
        >>> cutover = PowertoolsCutover(
        ...     table_name="IdempotencyTable",
        ...     until=dt.datetime(2030, 7, 1, tzinfo=dt.timezone.utc),
        ...     function="app.record_handler",  # Powertools decorated app.py's record_handler
        ...     lambda_function_name="orders",  # defaults to AWS_LAMBDA_FUNCTION_NAME, as in Powertools
        ...     event_key_jmespath="messageId",
        ... )
        >>> cutover.prefix
        'orders.app.record_handler'
        >>> cutover.is_open(int(dt.datetime(2030, 6, 30, tzinfo=dt.timezone.utc).timestamp() * 1000))
        True

    Attributes:
        table_name: The Powertools table.
        until: When the read-through ends (timezone-aware; a naive datetime is refused). Leave at least one
            Powertools ``expires_after_seconds`` after the first deployment that reads through.
        function: The Powertools-decorated function, or its ``"module.qualname"`` (``"app.lambda_handler"``).
        key_prefix: The ``key_prefix`` Powertools' decorator was given (then ``function`` is not needed).
        lambda_function_name: The Lambda function name in Powertools' keys; defaults to ``AWS_LAMBDA_FUNCTION_NAME``
            (read now), else ``"test-func"``.
        event_key_jmespath: Powertools' ``event_key_jmespath``; ``""`` hashes the whole payload.
        payload_validation_jmespath: Powertools' ``payload_validation_jmespath``: a stored record made for another
            payload raises ``IdempotencyValidationError`` (the record fails), as Powertools did.
        hash_function: Powertools' ``hash_function`` (a :mod:`hashlib` name; ``md5`` by default).
        jmespath_options: Powertools' ``jmespath_options`` (by default its ``powertools_*`` functions, which here
            decode at most the config's ``max_decoded_bytes``, as ours do; functions given here are not bounded).
        payload: Turns what our guard receives into what the Powertools function received, when they differ (a
            Powertools batch processor with a parser ``model`` handed the record handler a model, for instance); when
            it raises, the record fails unrun (Powertools may have kept a record of what its function received).
        key_attr: Partition key attribute (``"id"``).
        sort_key_attr: Set on a composite-key table: the key is there and the partition key holds
            ``static_pk_value``.
        static_pk_value: Partition key value of a composite-key table; defaults to
            ``"idempotency#{AWS_LAMBDA_FUNCTION_NAME}"``.
        expiry_attr: Expiry attribute, epoch seconds (``"expiration"``).
        in_progress_expiry_attr: Lock deadline attribute, epoch milliseconds (``"in_progress_expiration"``).
        status_attr: Status attribute (``"status"``).
        data_attr: Stored response attribute (``"data"``).
        validation_key_attr: Payload-validation hash attribute (``"validation"``).
        boto3_client: The DynamoDB client to read with (pass ``store.client`` to share ours).
        boto3_session: A session to make the client from.
        boto_config: A botocore config for the client made here.
        prefix: The key prefix in force (derived).
    """

    table_name: str
    until: dt.datetime
    function: str | Callable[..., Any] | None = None
    key_prefix: str | None = None
    lambda_function_name: str | None = None
    event_key_jmespath: str = ""
    payload_validation_jmespath: str = ""
    hash_function: str = "md5"
    jmespath_options: Mapping[str, Any] | None = field(default=None, compare=False)
    payload: Callable[[Any], Any] | None = None
    key_attr: str = "id"
    sort_key_attr: str | None = None
    static_pk_value: str | None = None
    expiry_attr: str = "expiration"
    in_progress_expiry_attr: str = "in_progress_expiration"
    status_attr: str = "status"
    data_attr: str = "data"
    validation_key_attr: str = "validation"
    boto3_client: DynamoDBClient | None = field(default=None, repr=False, compare=False)
    boto3_session: boto3.session.Session | None = field(default=None, repr=False, compare=False)
    boto_config: Config | None = field(default=None, repr=False, compare=False)
    prefix: str = field(init=False, repr=False, compare=False, default="")
    _partition_value: str = field(init=False, repr=False, compare=False, default="")
    _until_ms: float = field(init=False, repr=False, compare=False, default=0.0)
    _key_expression: ParsedResult | None = field(init=False, repr=False, compare=False, default=None)
    _validation_expression: ParsedResult | None = field(init=False, repr=False, compare=False, default=None)
    _options: jmespath.Options | None = field(init=False, repr=False, compare=False, default=None)
    _hasher: Callable[[bytes], Any] = field(init=False, repr=False, compare=False, default=hashlib.sha256)
    _table: DynamoDBPersistenceLayer = field(init=False, repr=False, compare=False)  # its client: made once, shared

    def __post_init__(self) -> None:
        """Validate the options and derive the key prefix, hash and expressions once."""
        until = self.until
        _require(isinstance(until, dt.datetime), f"until must be a datetime, got {until!r}")
        _require(
            until.tzinfo is not None and until.utcoffset() is not None,
            f"until must be timezone-aware, e.g. datetime(2030, 7, 1, tzinfo=timezone.utc); got the naive {until!r}",
        )
        check_options(self.table_name, self.payload)
        _require(self.sort_key_attr != self.key_attr, f"sort_key_attr must differ from key_attr ({self.key_attr!r})")
        function = self.function
        if callable(function):
            function = f"{function.__module__}.{function.__qualname__}"
        _require(
            bool(self.key_prefix or function),
            "name the Powertools-decorated function (function=...) or the key_prefix Powertools was given",
        )
        lambda_name = self.lambda_function_name
        if lambda_name is None:
            lambda_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "test-func")
        # Powertools' "" (its default) selects the whole payload: no expression, as our None.
        key_expression = _compile("event_key_jmespath", self.event_key_jmespath or None)
        validation_expression = _compile("payload_validation_jmespath", self.payload_validation_jmespath or None)
        options = given_options(
            self.jmespath_options, event_key_jmespath=key_expression, payload_validation_jmespath=validation_expression
        )
        derived: dict[str, Any] = {
            "prefix": self.key_prefix or f"{lambda_name}.{function}",
            "_partition_value": self.static_pk_value
            if self.static_pk_value is not None
            else f"idempotency#{os.environ.get('AWS_LAMBDA_FUNCTION_NAME', '')}",
            "_until_ms": until.timestamp() * 1000,
            "_key_expression": key_expression,
            "_validation_expression": validation_expression,
            "_options": options,
            "_hasher": hasher(self.hash_function),
            "_table": DynamoDBPersistenceLayer(
                self.table_name,
                boto3_client=self.boto3_client,
                boto3_session=self.boto3_session,
                boto_config=self.boto_config,
            ),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    # -- keys -----------------------------------------------------------------------------------------

    def is_open(self, now_ms: int) -> bool:
        """Whether the window is open at ``now_ms`` (epoch milliseconds, the guard's clock)."""
        return now_ms < self._until_ms

    def _select(self, expression: ParsedResult | None, payload: Any, limit: int) -> Any:
        options = self._options or powertools_options(limit)  # ours: a budget per evaluation, as the config's
        return payload if expression is None else search(expression, payload, options)

    def powertools_key(self, data: Any, *, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES) -> str | None:
        """The key Powertools gave ``data``; ``None``: it kept no record.

        ``data`` is what our guard receives (a batch's record, a typed record, the data of an ``@idempotent_function``),
        standing for what the Powertools function received: a batch record is hashed as its event carries it.

        Raises:
            DecodeLimitError: A decoding function met more than ``max_decoded_bytes`` (Powertools may have kept one).
            Exception: Whatever else selecting or serializing the payload raised (Powertools failed the same way, so
                it kept no record either).
        """
        return self._key_of(self._payload(data), max_decoded_bytes)

    def _payload(self, data: Any, our_key: str = "") -> Any:
        """What the Powertools function received, as Powertools hashed it; a failing ``payload=`` fails the record."""
        try:
            return powertools_payload(data) if self.payload is None else self.payload(data)
        except Exception as e:  # ours, not Powertools': Powertools may have kept a record of what it received
            raise IdempotencyKeyError(f"the cut-over's payload of {our_key!r} failed: {failure_said(e)}") from e

    def _key_of(self, payload: Any, limit: int) -> str | None:
        selection = self._select(self._key_expression, payload, limit)
        return None if is_missing(selection) else f"{self.prefix}#{digest(selection, self._hasher)}"

    # -- the read ---------------------------------------------------------------------------------------

    def _read(self, key: str, our_key: str) -> dict[str, Any] | None:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 - lazy, as boto3

        item_key = {self.key_attr: {"S": key}}
        if self.sort_key_attr is not None:
            item_key = {self.key_attr: {"S": self._partition_value}, self.sort_key_attr: {"S": key}}
        try:
            answer = self._table.client.get_item(TableName=self.table_name, Key=item_key, ConsistentRead=True)
        except (ClientError, BotoCoreError, UnicodeError) as e:
            raise PersistenceLayerError(
                f"reading the Powertools record {key!r} of {our_key!r} from {self.table_name!r} failed: {e}",
                key=our_key,
            ) from e
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def _find(self, data: Any, held: IdempotencyRecord, now_ms: int, limit: int) -> IdempotencyRecord | None:
        """What the Powertools table says of ``data``, in our terms (see :meth:`read_through`)."""
        payload = self._payload(data, held.key)  # once: the key and the validation hash both read it
        try:
            key = self._key_of(payload, limit)
        except DecodeLimitError as e:  # unbounded, Powertools may have keyed it: the record fails, unrun
            msg = f"the Powertools cut-over's key of {held.key!r} (event_key_jmespath {self.event_key_jmespath!r}): {e}"
            raise DecodeLimitError(msg, function=e.function, limit=e.limit) from None
        except MISCONFIGURED as e:  # not the payload's: Powertools keyed with functions the cut-over lacks
            msg = (
                f"the Powertools cut-over cannot key {held.key!r} as Powertools did: event_key_jmespath "
                f"{self.event_key_jmespath!r}: {e} (give it the jmespath_options Powertools keyed with)"
            )
            raise IdempotencyConfigError(msg) from e
        except Exception as e:  # noqa: BLE001 - Powertools failed on this payload too: it kept no record of it
            said = failure_said(e)  # its text may quote the payload (JMESPath's type error does): not logged
            logger.warning("no Powertools key for %r (%s): Powertools kept no record of it", held.key, said)
            return None
        if key is None:
            return None
        item = self._read(key, held.key)
        if item is None:
            return None
        try:
            status = item[self.status_attr]["S"]
            expires_at = int(item[self.expiry_attr]["N"])
            lock = item.get(self.in_progress_expiry_attr)
            lock_ms = None if lock is None else int(lock["N"])
            if status not in (COMPLETED, INPROGRESS):
                raise ValueError(f"status {status!r}")  # noqa: TRY301 - one message for every malformed item
        except (KeyError, TypeError, ValueError) as e:
            msg = f"the Powertools item {key!r} of {held.key!r} is not a Powertools record ({e!r}): not run"
            raise PersistenceLayerError(msg, key=held.key) from e
        if expires_at < now_ms // 1000 or (status == INPROGRESS and lock_ms is not None and lock_ms < now_ms):
            return None  # expired, or its holder missed its deadline: Powertools would run it again
        self._validate(payload, key, item, held.key, limit)
        if status == INPROGRESS:
            lock_ms = expires_at * 1000 if lock_ms is None else lock_ms  # without a deadline it lives to its expiry
            return IdempotencyRecord(key, RecordStatus.IN_PROGRESS, expires_at, lock_ms)
        return held.completed(stored_response(key, item.get(self.data_attr)), expires_at)

    def _validate(self, payload: Any, key: str, item: dict[str, Any], our_key: str, limit: int) -> None:
        if self._validation_expression is None:
            return
        stored = item.get(self.validation_key_attr, {}).get("S")
        if stored != digest(self._select(self._validation_expression, payload, limit), self._hasher):
            raise IdempotencyValidationError(
                f"the Powertools record {key!r} was made for a different payload "
                f"(payload_validation_jmespath {self.payload_validation_jmespath!r})",
                key=our_key,
            )

    # -- the hook -----------------------------------------------------------------------------------

    def read_through(
        self, data: Any, held: IdempotencyRecord, store: PersistenceLayer, now_ms: int, max_decoded_bytes: int
    ) -> IdempotencyRecord | None:
        """The guard's hook: our lock ``held`` was just taken on ``data``'s key; read the Powertools table.

        The Powertools expressions' functions decode at most ``max_decoded_bytes`` (the guard passes its config's).

        Returns:
            ``None``: the body runs, under our lock. A ``COMPLETE`` record: ours, committed with the Powertools
            response (the guard replays it). An ``IN_PROGRESS`` record: the live Powertools lock (ours was
            released; the guard reports the record in progress).

        Raises:
            PersistenceLayerError: The read or our commit failed (our lock was released; the body must not run).
            IdempotencyValidationError: The Powertools record was made for a different payload (lock released).
            IdempotencyKeyError: ``payload=`` failed, or a decoder met over ``max_decoded_bytes`` (DecodeLimitError):
                Powertools may have kept a record of it, so the body must not run (lock released).
            IdempotencyConfigError: The cut-over's JMESPath options cannot evaluate its key expression as
                Powertools did (a function's arity, or a function only resolved when called): lock released.
        """
        try:
            found = self._find(data, held, now_ms, max_decoded_bytes)
            if found is not None and found.status is RecordStatus.COMPLETE:  # copied to our store, and replayed
                return _kept(*commit(store, held, found, [], _release_failed))
        except BaseException as e:
            _release_after(functools.partial(store.release, held), held, e)
            raise
        if found is not None:  # Powertools' live lock: ours goes
            store.release(held)
        return found

    async def aread_through(
        self, data: Any, held: IdempotencyRecord, store: AsyncPersistenceLayer, now_ms: int, max_decoded_bytes: int
    ) -> IdempotencyRecord | None:
        """:meth:`read_through` for ``async with``: the Powertools read runs in a thread, our store's calls on the loop.

        No thread waits for the loop (a store's call may itself need one of the loop's threads). A cancellation
        waits for the read or the store call under way: a copy committed stays committed; otherwise our lock is
        released.

        Raises:
            The same as :meth:`read_through`, and ``asyncio.CancelledError``: the body must not run.
        """
        import asyncio  # noqa: PLC0415 - imported by the running loop already

        copy = too_large = cancelled = None
        try:
            found = await settled(asyncio.to_thread(self._find, data, held, now_ms, max_decoded_bytes))
            if found is not None and found.status is RecordStatus.COMPLETE:  # copied to our store, and replayed
                copy, too_large, done, cancelled = await acommit(store, held, found, [], _release_failed)
                if cancelled is not None and copy is None:  # not committed: our lock goes
                    raise cancelled from (None if done.cancelled() else done.exception())  # noqa: TRY301 - released below
                done.result()  # the store's error, when the copy was not committed: our lock goes
        except BaseException as e:
            releasing, _ = await settle(store.release(held))
            _release_after(releasing.result, held, e)
            raise
        if copy is not None:
            _kept(copy, too_large)
            if cancelled is not None:  # it came while the copy was committed: the copy stands, the body never runs
                raise cancelled
            return copy
        if found is not None:  # Powertools' live lock: ours goes
            await settled(store.release(held))
        return found


def _kept(copy: IdempotencyRecord, too_large: ItemTooLargeError | None) -> IdempotencyRecord:
    """The copy committed; said once committed when it is kept without the response (a failed commit fails)."""
    if too_large is not None:
        logger.warning(
            "the Powertools response of %r is too large for our store (%s): kept without it", copy.key, too_large
        )
    return copy


def _release_after(release: Callable[[], object], held: IdempotencyRecord, error: BaseException) -> None:
    """Release our lock after the read-through failed with ``error`` (``release`` does, or reads how it went)."""
    try:
        release()
    except Exception as failed:  # noqa: BLE001 - any store's failure: the read-through's error still wins
        _release_failed(held, error, failed)


def _release_failed(held: IdempotencyRecord, error: BaseException | None, failed: Exception) -> None:
    """Releasing ``held`` failed with ``failed`` after ``error``: logged, and noted on ``error``."""
    logger.error("could not release %r after the Powertools read-through failed (%r): %s", held.key, error, failed)
    if error is not None and hasattr(error, "add_note"):  # Python 3.11+
        error.add_note(f"idempotent-consumer: releasing {held.key!r} failed as well: {failed!r}")
