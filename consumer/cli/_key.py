"""``idempotent-consumer key``: what each record of an event selects, and the key it gets, before deploying."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from consumer._serde import canonical_json
from consumer.cli._records import EXIT_NOT_FOUND, EXIT_OK, CommandError, out
from consumer.config import IdempotencyConfig
from consumer.keys import DEFAULT_KEY_EXPRESSIONS, key_selection, make_key, missing_key_message
from consumer.sources import is_kafka_event, kafka_records, refuse_key_header
from persistence import IdempotencyError

if TYPE_CHECKING:
    import argparse

EXIT_USAGE = 2
EXIT_UNKEYED = EXIT_NOT_FOUND  # a record gets no key: it would fail in a consumer


def key_command(args: argparse.Namespace, event: Any) -> int:
    """``key``: per record, what its key hashes and the key; exit 1 when a record gets no key.

    What is shown is what is hashed: the whole record for ``--jmespath ''``; with ``--header`` and
    ``--no-raise-on-no-idempotency-key``, a record without that header is keyed by its own id, which the line says.
    A record whose selection is missing is one line saying so (with the fix when the selection went into JSON text,
    as the processor's error says), as is a record the key expression fails on, or one that is not an object: each
    would fail in a consumer, so the command exits 1. With ``--no-raise-on-no-idempotency-key``, a record without a
    key would run unguarded, as the line says with the same words; that alone does not make the exit status 1.

    Raises:
        CommandError: The options do not make a config (exit 2), or the event has no records of the source.
    """
    try:
        config = IdempotencyConfig(
            event_key_jmespath=args.jmespath,
            key_prefix=args.prefix,
            key_header=args.header,
            raise_on_no_idempotency_key=args.raise_on_no_idempotency_key,
        )
    except IdempotencyError as e:
        raise CommandError(str(e), EXIT_USAGE) from e
    unkeyed = False
    for index, record in enumerate(_records(event, args.event_type, args.header)):
        if not isinstance(record, Mapping):
            out(f"record {index}: not a record: a JSON {_json_type(record)}, where an object is expected")
            unkeyed = True
            continue
        try:
            selection, own_id = key_selection(record, config)  # what make_key hashes
            key = make_key(record, config)
        except IdempotencyError as e:  # the message the record would fail with (missing_key_message when missing)
            out(f"record {index}: {e}")
            unkeyed = True
            continue
        if own_id:
            out(f"record {index}: no header {args.header!r}: its own id selected {shown(selection)}")
        else:
            out(f"record {index}: selected {shown(selection)}")
        if key is None:
            out(f"  would run unguarded: {missing_key_message(record, config)}")
        else:
            out(f"  key {key}")
    return EXIT_UNKEYED if unkeyed else EXIT_OK


def shown(selection: Any) -> str:
    """What a key hashes, exactly: its canonical JSON (:func:`consumer.canonical_json`); bytes in hexadecimal.

    A whole selection of bytes (a header that is not UTF-8, keyed as bytes) reads ``bytes ff12... (not UTF-8)``;
    bytes inside one (``[header(@, 'k'), topic]``) read as they are hashed, ``{"__ic__":"bytes","v":"ff12..."}``,
    which no text and no payload (whose own ``__ic__`` keys are escaped) shows alike.
    """
    if isinstance(selection, bytes):
        return f"bytes {selection.hex()} (not UTF-8)"
    return canonical_json(selection)


def _records(event: Any, event_type: str | None, header: str | None) -> list[Any]:
    """The records of ``event`` as ``event_type`` (default: detected) lays them out.

    Raises:
        CommandError: ``event`` is not an object, its records are not a list (an object of lists for Kafka), or
            it has none; or ``header`` is given for a source without headers (exit 2, as the processor refuses).
    """
    if not isinstance(event, Mapping):
        raise CommandError(f"the event is a JSON {_json_type(event)}: an event is an object")
    source = event_type or _detect_source(event)
    if header is not None:
        try:
            refuse_key_header(source)
        except ValueError as e:
            raise CommandError(str(e), EXIT_USAGE) from None
    if source == "kafka":
        try:
            records = kafka_records(event)
        except ValueError as e:
            raise CommandError(str(e)) from e
    elif source == "eventbridge":
        records = [event]
    else:
        listed = event.get("Records")
        if listed is not None and not isinstance(listed, list):
            raise CommandError(f"the event's 'Records' is a JSON {_json_type(listed)}: a list of records is expected")
        records = listed or []
    if not records:
        layout = "a 'records' object" if source == "kafka" else "a 'Records' list"
        raise CommandError(f"the event has no records of its own for --event-type {source} ({layout} of them)")
    return records


def _detect_source(event: Mapping[str, Any]) -> str:
    if is_kafka_event(event):
        return "kafka"
    if "Records" not in event:
        return "eventbridge"
    records = event["Records"]
    first = records[0] if isinstance(records, list) and records else None
    source = str(first.get("eventSource", "")).removeprefix("aws:") if isinstance(first, Mapping) else ""
    return source if source in DEFAULT_KEY_EXPRESSIONS else "sqs"


def _json_type(value: object) -> str:
    """The JSON name of ``value``'s type (what the event file holds)."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
