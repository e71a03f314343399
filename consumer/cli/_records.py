"""Operator commands: ``records list|show|delete|stuck``, ``table create`` (``key``: :mod:`consumer.cli._key`)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consumer._reports import one_line
from persistence import (
    DEFAULT_STORE_URL,
    STORE_URL_VARIABLE,
    IdempotencyRecord,
    LockLostError,
    RecordStatus,
    SQLitePersistenceLayer,
    store_from_url,
)

if TYPE_CHECKING:
    import argparse

    from persistence import PersistenceLayer

EXIT_OK, EXIT_NOT_FOUND = 0, 1


class CommandError(Exception):
    """A failure reported as one line with an exit code (1: failed or not found, 2: usage)."""

    def __init__(self, message: str, code: int = EXIT_NOT_FOUND) -> None:
        """Build the error."""
        super().__init__(message)
        self.code = code


def out(text: str = "") -> None:
    r"""Print one line of the command's output; text stdout cannot encode is printed backslash-escaped.

    The output quotes what a store holds (keys, responses, a foreign table's rows) and what a producer wrote (the
    ``key`` command's selections): its line breaks, control characters and bidirectional controls are escaped
    (``\u2028``), so the line stays one line, reaches the terminal as text, and JSON output stays the same JSON. A
    stored response may hold a lone surrogate (``"\ud83d"``); escaped, it still reads back as JSON.
    """
    text = one_line(text)
    try:
        print(text)  # noqa: T201 - the command's output
    except UnicodeEncodeError:
        encoding = sys.stdout.encoding or "utf-8"
        print(text.encode(encoding, "backslashreplace").decode(encoding))  # noqa: T201


def store_url(option: str | None) -> str:
    """The store URL a command uses: ``--store`` if given, else ``$IDEMPOTENCY_STORE_URL``, else the default.

    Args:
        option: The ``--store`` option's value (``None`` when it was not given).

    Returns:
        The URL; an empty option or variable counts as not given, as in ``store_from_url``.
    """
    return option or os.environ.get(STORE_URL_VARIABLE) or DEFAULT_STORE_URL


def open_store(option: str | None, *, read_only: bool = True) -> PersistenceLayer:
    """The store the ``records`` commands read: ``--store``, else ``$IDEMPOTENCY_STORE_URL``, else the default.

    A SQLite file that does not exist is an error (exit 1), never an empty store created on the spot: a
    command run from the wrong directory, or with a mistyped path, would show no records and leave a file behind.
    A command that only reads opens a SQLite file read-only: it creates no table and switches no journal mode (the
    file may be another application's database that happens to have a ``records`` table).

    Args:
        option: The ``--store`` option's value (``None`` when it was not given).
        read_only: Whether the command only reads (``records delete`` writes).

    Raises:
        CommandError: The URL names no store (exit 2), or a SQLite file that does not exist (exit 1).
    """
    url = store_url(option)
    try:
        store = store_from_url(url)
    except ValueError as e:
        raise CommandError(str(e), 2) from e
    if isinstance(store, SQLitePersistenceLayer) and not store.path.exists():
        where = "" if store.path.is_absolute() else f" (in {Path.cwd()})"
        raise CommandError(
            f"the SQLite store {str(store.path)!r}{where} does not exist (store {url!r}); run the command where the "
            f"consumer wrote its store, or name it with --store or ${STORE_URL_VARIABLE}"
        )
    if isinstance(store, SQLitePersistenceLayer) and not _holds_records(store.path):
        raise CommandError(
            f"{str(store.path)!r} is a SQLite file but not an idempotency store: it has no 'records' table (store"
            f" {url!r}); name the file the consumer writes, with --store or ${STORE_URL_VARIABLE}"
        )
    if isinstance(store, SQLitePersistenceLayer) and read_only:
        return SQLitePersistenceLayer(store.path, read_only=True)
    return store


def _holds_records(path: Path) -> bool:
    """Whether the SQLite file at ``path`` has the store's table, read without writing to it (no table, no WAL)."""
    import sqlite3  # noqa: PLC0415 - only the records commands on a SQLite store need it

    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'records'")
            return found.fetchone() is not None
    except sqlite3.DatabaseError:  # not a database at all: the store's own error says so when it opens
        return True


def _now_ms() -> int:
    return int(time.time() * 1000)


def _span(ms: int) -> str:
    seconds = abs(ms) // 1000
    hours, rest = divmod(seconds, 3600)
    text = f"{hours}h {rest // 60}m" if hours else f"{rest // 60}m {rest % 60}s" if rest >= 60 else f"{rest}s"  # noqa: PLR2004
    return f"in {text}" if ms >= 0 else f"{text} ago"


def _row(record: IdempotencyRecord, now_ms: int) -> dict[str, Any]:
    deadline = record.in_progress_expires_at
    return {
        **asdict(record),
        "status": record.effective_status(now_ms).value,
        "stored_status": record.status.value,
        "expires": _span(record.expires_at * 1000 - now_ms),
        "lock_deadline": "-" if deadline is None else _span(deadline - now_ms),
        "response_bytes": _response_bytes(record),
    }


def _response_bytes(record: IdempotencyRecord) -> int | None:
    # As the item size check counts it: a lone surrogate counts 3 bytes (it has no UTF-8 form).
    return None if record.response is None else len(record.response.encode("utf-8", "surrogatepass"))


def _scan(store: PersistenceLayer, status: str | None, limit: int | None) -> list[IdempotencyRecord]:
    # The store pages lazily: stop reading once `limit` records passed the effective-status filter.
    now = _now_ms()
    if status == RecordStatus.EXPIRED.value:
        records = (r for r in store.scan() if r.is_expired(now))
    else:
        stored = None if status is None else RecordStatus(status)
        records = (r for r in store.scan(stored) if stored is None or not r.is_expired(now))
    return list(itertools.islice(records, limit))


def _print_table(records: list[IdempotencyRecord], as_json: bool) -> None:
    now = _now_ms()
    rows = [_row(r, now) for r in records]
    if as_json:
        for row in rows:
            out(json.dumps(row, ensure_ascii=False))
        return
    header = ("KEY", "STATUS", "EXPIRES", "LOCK DEADLINE", "RESPONSE")
    # The key escaped before the widths are measured (out() escapes again, to the same text): the columns align.
    cells = [
        (one_line(r["key"]), r["status"], r["expires"], r["lock_deadline"], _size(r["response_bytes"])) for r in rows
    ]
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(len(header))]
    for line in [header, *cells]:
        out("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    out(f"({len(rows)} record{'s' if len(rows) != 1 else ''})")


def _size(size: int | None) -> str:
    return "not stored" if size is None else f"{size} B"


def records_list(args: argparse.Namespace) -> int:
    """``records list``: a table (or JSON lines) of records."""
    _print_table(_scan(open_store(args.store), args.status, args.limit), args.json)
    return EXIT_OK


def records_stuck(args: argparse.Namespace) -> int:
    """``records stuck``: IN_PROGRESS records past their lock deadline (their holder crashed)."""
    now = _now_ms()
    stuck = [r for r in open_store(args.store).scan(RecordStatus.IN_PROGRESS) if r.is_lock_expired(now)]
    _print_table(stuck, args.json)
    return EXIT_OK


def _get(store: PersistenceLayer, key: str) -> IdempotencyRecord:
    record = store.get(key)
    if record is None:
        raise CommandError(f"no record {key!r}")
    return record


def records_show(args: argparse.Namespace) -> int:
    """``records show KEY``: the whole record, its times in ISO 8601 (UTC), its response pretty-printed."""
    record = _get(open_store(args.store), args.key)
    now = _now_ms()
    status = record.effective_status(now)
    deadline = record.in_progress_expires_at
    fields = {
        "key": record.key,
        "status": status.value if status is record.status else f"{status.value} (stored as {record.status.value})",
        "expires_at": _moment(record.expires_at * 1000, now, unit="s"),
        "lock_deadline": "-" if deadline is None else _moment(deadline, now),
        "lease": record.lease,
        "payload_hash": record.payload_hash,
        "response_bytes": _response_bytes(record),
    }
    for name, value in fields.items():
        out(f"{name + ':':<24}{value}")
    out("response:")
    response = record.response
    for line in ["(not stored)"] if response is None else json.dumps(json.loads(response), indent=2).splitlines():
        out("  " + line)
    return EXIT_OK


def _moment(ms: int, now_ms: int, unit: str = "ms") -> str:
    """``ms`` (epoch milliseconds) in ISO 8601 (UTC), beside the epoch number (in ``unit``) and a span from now."""
    iso = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")
    number = ms if unit == "ms" else ms // 1000
    return f"{iso.replace('+00:00', 'Z')} (epoch {unit} {number}, {_span(ms - now_ms)})"


def _live_lock(record: IdempotencyRecord, now_ms: int) -> str | None:
    """Who holds ``record`` until when, if it is a live lock (an acquire would be refused); else ``None``."""
    if record.status is not RecordStatus.IN_PROGRESS or record.can_be_acquired(now_ms):
        return None
    deadline = record.in_progress_expires_at
    until = record.expires_at * 1000 if deadline is None else deadline
    return f"held by lease {record.lease} until {_moment(until, now_ms)}"


def _describe(record: IdempotencyRecord) -> str:
    return f"{record.status.value} under lease {record.lease}"


def _changed(read: IdempotencyRecord, now: IdempotencyRecord | None) -> str:
    """Why nothing was deleted: the record ``read`` is no longer there as it was; ``now`` is what is there."""
    same_lease = now is not None and now.lease == read.lease
    why = "its holder committed it" if same_lease else "it was deleted" if now is None else "it was acquired again"
    return (
        f"nothing deleted: {read.key!r} changed since it was read ({why} meanwhile): it was {_describe(read)}, "
        f"it is now {'gone' if now is None else _describe(now)}; run the command again to see it as it is now"
    )


def records_delete(args: argparse.Namespace) -> int:
    """``records delete KEY``: let one record run again (asks first, unless ``--yes``).

    A live ``IN_PROGRESS`` lock (its holder may still be running) is refused unless ``--force``: deleting
    it lets a duplicate run beside the holder. Only the record read and checked is deleted (the store's
    ``release``, conditional on its status and lease): if it changed meanwhile (its holder committed it while
    the operator was asked, or another invocation acquired it), nothing is deleted and the command fails.
    """
    store = open_store(args.store, read_only=False)
    record = _get(store, args.key)
    holder = _live_lock(record, _now_ms())
    if holder is not None and not args.force:
        raise CommandError(
            f"refusing to delete {args.key!r}: it is a live IN_PROGRESS lock, {holder}; deleting it lets a "
            "duplicate run while its holder is still running (--force deletes it anyway)"
        )
    if not args.yes:
        question = f"Delete {record.status.value} record {args.key!r}? Its record will run again."
        if holder is not None:
            question = f"Delete the live IN_PROGRESS lock {args.key!r}, {holder}? A duplicate may run beside it."
        sys.stdout.write(f"{one_line(question)} [y/N] ")
        sys.stdout.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            raise CommandError("not deleted")
    try:
        store.release(record)
    except LockLostError as e:
        raise CommandError(_changed(record, e.existing_record)) from e
    out(f"deleted {args.key}")
    return EXIT_OK


def table_create(args: argparse.Namespace) -> int:
    """``table create``: the idempotency table, with TTL on ``expiration``; an existing table is fine."""
    import boto3  # noqa: PLC0415 - only this command needs it

    client = boto3.session.Session().client("dynamodb", endpoint_url=args.endpoint_url, region_name=args.region)
    names = ["id", "sort_key"] if args.sort_key else ["id"]
    schema: list[Any] = [{"AttributeName": "id", "KeyType": "HASH"}]
    if args.sort_key:
        schema.append({"AttributeName": "sort_key", "KeyType": "RANGE"})
    try:
        client.create_table(
            TableName=args.table,
            KeySchema=schema,
            AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in names],
            BillingMode="PAY_PER_REQUEST",
        )
        created = True
    except client.exceptions.ResourceInUseException:
        created = False
    client.get_waiter("table_exists").wait(TableName=args.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    ttl = client.describe_time_to_live(TableName=args.table)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        client.update_time_to_live(
            TableName=args.table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"}
        )
    out(f"{'created' if created else 'table exists:'} {args.table} (key id, TTL on expiration)")
    return EXIT_OK
