"""The embedded store: one SQLite file, safe across threads and processes on one host."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from persistence._attributes import check_size
from persistence._base import ConditionalStore, decode_record, require_stored_status
from persistence._errors import PersistenceLayerError, WriteConditionError
from persistence._record import MS_PER_SECOND, IdempotencyRecord, RecordStatus

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

DEFAULT_PATH = ".idempotency.sqlite3"
_COLUMNS = "key, status, expires_at, in_progress_expires_at, lease, response, payload_hash"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    in_progress_expires_at INTEGER,
    lease TEXT NOT NULL,
    response TEXT,
    payload_hash TEXT
)
"""
# acquire:  INSERT new IN_PROGRESS row
#           └─ key exists ─> overwrite only WHERE expires_at < now_s
#                                        OR (status = IN_PROGRESS AND in_progress_expires_at < now_ms)
#           changes() = 0 ─> read the blocking row in the same transaction and return it
_ACQUIRE = """
INSERT INTO records (key, status, expires_at, in_progress_expires_at, lease, response, payload_hash)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET
    status = excluded.status, expires_at = excluded.expires_at,
    in_progress_expires_at = excluded.in_progress_expires_at, lease = excluded.lease,
    response = excluded.response, payload_hash = excluded.payload_hash
WHERE records.expires_at < ? OR (records.status = 'IN_PROGRESS' AND records.in_progress_expires_at < ?)
"""
# complete: UPDATE to COMPLETE  WHERE lease = mine AND status = IN_PROGRESS   (0 rows ─> LockLostError)
_COMPLETE = """
UPDATE records SET status = ?, expires_at = ?, in_progress_expires_at = NULL, response = ?, payload_hash = ?
WHERE key = ? AND lease = ? AND status = 'IN_PROGRESS'
"""
# release:  DELETE  WHERE status = as read AND lease = as read
#           0 rows ─> gone already (released), or what is there now: LockLostError
_RELEASE = "DELETE FROM records WHERE key = ? AND status = ? AND lease = ?"


def _row_to_record(row: tuple[object, ...]) -> IdempotencyRecord:
    # SQLite's column types are affinities: a row written by someone else can hold any value anywhere.
    key, status, expires_at, deadline, lease, response, payload_hash = row
    return decode_record(key=key, status=status, expires_at=expires_at, in_progress_expires_at=deadline,
                         lease=lease, response=response, payload_hash=payload_hash)  # fmt: skip


def _set_up(conn: sqlite3.Connection, *, last_try: bool) -> bool:
    """Switch to WAL and create the table; ``False`` when the file is locked and we may try again."""
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(_SCHEMA)
    except sqlite3.OperationalError:
        if last_try:
            conn.close()
            raise
        return False
    return True


class SQLitePersistenceLayer(ConditionalStore):
    """Records in a SQLite file (WAL mode); the embedded default for local runs and demos.

    Each write is one statement inside ``BEGIN IMMEDIATE``, so the conditional semantics hold between
    threads and between processes sharing the file. Each thread (and each forked process) gets its own
    connection. The file holds stored responses in clear: one it creates is readable by its owner only (mode
    ``0600``, whatever the umask), and so are the ``-wal`` and ``-shm`` files SQLite makes beside it (SQLite gives
    them the database's mode). An existing file keeps its mode.

    Examples:
        >>> import tempfile, os
        >>> from persistence import SQLitePersistenceLayer
        >>> store = SQLitePersistenceLayer(os.path.join(tempfile.mkdtemp(), "idempotency.sqlite3"))
        >>> store.get("local#abc") is None
        True
    """

    def __init__(
        self, path: str | os.PathLike[str] = DEFAULT_PATH, *, timeout_seconds: float = 30.0, read_only: bool = False
    ) -> None:
        """Open (lazily) the store at ``path``; the file and table are created on first use.

        Args:
            path: The SQLite file.
            timeout_seconds: How long a write waits for another writer's lock before failing.
            read_only: Read an existing file and change nothing: no file, table or journal mode is created or
                switched (SQLite may still make the ``-wal`` and ``-shm`` files a reader of a WAL file needs);
                every write fails with ``PersistenceLayerError``. What the ``records`` commands that only read use.
        """
        self.path = Path(path)
        self._timeout = timeout_seconds
        self._read_only = read_only
        self._local = threading.local()

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            try:
                conn = self._open()
            except (sqlite3.Error, OSError) as e:
                raise PersistenceLayerError(f"cannot open the SQLite store {str(self.path)!r}: {e}") from e
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _open(self) -> sqlite3.Connection:
        if self._read_only:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            return sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))  # created private; an existing file keeps its mode
        conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
        # Switching a new file to WAL can fail with "database is locked" without waiting on the busy
        # timeout when several processes open it at once: retry until the timeout instead.
        give_up = time.monotonic() + self._timeout
        while not _set_up(conn, last_try=time.monotonic() > give_up):
            time.sleep(0.01)
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @contextlib.contextmanager
    def _transaction(self, key: str | None, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise PersistenceLayerError(f"SQLite store failed on {key!r}: {e}", key=key) from e
        except UnicodeEncodeError as e:
            # SQLite text is UTF-8: a str holding a lone surrogate (json.dumps(..., ensure_ascii=False) makes
            # one from the valid JSON "\\ud83d") has no UTF-8 form, and the sqlite3 module raises this.
            raise PersistenceLayerError(f"SQLite store cannot encode the text of {key!r}: {e}", key=key) from e

    def _acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        check_size(record)
        values = (record.key, record.status.value, record.expires_at, record.in_progress_expires_at,
                  record.lease, record.response, record.payload_hash)  # fmt: skip
        with self._transaction(record.key) as conn:
            if conn.execute(_ACQUIRE, (*values, now_ms // MS_PER_SECOND, now_ms)).rowcount == 1:
                return record
            return self._select(conn, record.key)

    def queue_write(self, key: str, writes: list[Any], item: Any, params: Any) -> None:
        """See :meth:`persistence.TransactionalStore.queue_write`: ``item`` is one SQL statement.

        ``params`` are its parameters (a sequence for ``?``, a mapping for ``:name``; none by default). The
        statement is prepared now, on this thread's connection (``EXPLAIN``: nothing runs), so SQL that cannot
        run is refused here, in the body, with the store's error chained.
        """
        params = () if params is None else params
        if not isinstance(item, str) or isinstance(params, (str, bytes)):
            msg = f"write {len(writes)}: a SQLite write is SQL text and its params, got {type(item).__name__}"
            raise TypeError(msg)
        try:
            self._connection().execute(f"EXPLAIN {item}", params)
        except sqlite3.Error as e:
            msg = f"write {len(writes)} for {key!r} cannot run on {self.path}: {e}"
            raise ValueError(msg) from e
        writes.append((item, params))

    def complete_with(self, record: IdempotencyRecord, writes: Sequence[Any]) -> None:
        """See :meth:`persistence.TransactionalStore.complete_with`: one ``BEGIN IMMEDIATE`` ... ``COMMIT``.

        A write that breaks a constraint of its table (``CHECK``, ``UNIQUE``, ``NOT NULL``, a foreign key, a
        trigger's ``RAISE(ABORT, ...)``) is its refused condition: :class:`WriteConditionError`.
        """
        self._commit(record, writes)

    def _complete(self, record: IdempotencyRecord, writes: Sequence[Any] | None) -> IdempotencyRecord | None:
        check_size(record)
        values = (record.status.value, record.expires_at, record.response, record.payload_hash,
                  record.key, record.lease)  # fmt: skip
        with self._transaction(record.key) as conn:
            if conn.execute(_COMPLETE, values).rowcount != 1:
                return self._select(conn, record.key)
            index = 0
            try:
                for index, (sql, params) in enumerate(writes or ()):  # noqa: B007 - read by the handler
                    conn.execute(sql, params)
            except sqlite3.IntegrityError as e:  # rolled back by the transaction
                reason, detail = type(e).__name__, str(e)
                raise WriteConditionError(key=record.key, index=index, reason=reason, detail=detail) from e
            return record

    def _release(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        with self._transaction(record.key) as conn:
            if conn.execute(_RELEASE, (record.key, record.status.value, record.lease)).rowcount == 1:
                return None
            return self._select(conn, record.key)

    def get(self, key: str) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.get`."""
        with self._transaction(key, write=False) as conn:
            return self._select(conn, key)

    def delete(self, key: str) -> bool:
        """See :meth:`persistence.PersistenceLayer.delete`."""
        with self._transaction(key) as conn:
            return conn.execute("DELETE FROM records WHERE key = ?", (key,)).rowcount == 1

    def scan(self, status: RecordStatus | None = None, limit: int | None = None) -> Iterator[IdempotencyRecord]:
        """See :meth:`persistence.PersistenceLayer.scan`."""
        require_stored_status(status)
        sql = f"SELECT {_COLUMNS} FROM records WHERE (? IS NULL OR status = ?) ORDER BY key LIMIT ?"  # noqa: S608 - constant columns
        wanted = None if status is None else status.value
        with self._transaction(None, write=False) as conn:
            rows = conn.execute(sql, (wanted, wanted, -1 if limit is None else limit)).fetchall()
        return iter([_row_to_record(row) for row in rows])

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @staticmethod
    def _select(conn: sqlite3.Connection, key: str) -> IdempotencyRecord | None:
        row = conn.execute(f"SELECT {_COLUMNS} FROM records WHERE key = ?", (key,)).fetchone()  # noqa: S608 - constant columns
        return None if row is None else _row_to_record(row)
