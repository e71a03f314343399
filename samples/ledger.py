"""A stand-in for the downstream system a consumer changes (a payment provider, a warehouse, ...).

Every side effect a sample performs is one row here, so a test or the demo can count them: exactly-once
processing means exactly one row per business key, however often the record was delivered.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

LEDGER_VARIABLE = "SAMPLES_LEDGER"
DEFAULT_LEDGER = ".samples-ledger.sqlite3"


class Ledger:
    """Side effects by sample and business key, in a SQLite file shared by processes."""

    def __init__(self, path: str | None = None) -> None:
        """Open the ledger at ``path`` (default: ``$SAMPLES_LEDGER`` or ``.samples-ledger.sqlite3``)."""
        self.path = Path(path or os.environ.get(LEDGER_VARIABLE) or DEFAULT_LEDGER)
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("CREATE TABLE IF NOT EXISTS effects (sample TEXT, key TEXT, detail TEXT)")
            self._local.conn = conn
        return conn

    def record(self, sample: str, key: str, detail: str) -> None:
        """Perform (record) one side effect."""
        self._conn().execute("INSERT INTO effects VALUES (?, ?, ?)", (sample, key, detail))

    def entries(self, sample: str) -> list[tuple[str, str]]:
        """Every side effect of ``sample``, as ``(key, detail)`` in the order they happened."""
        rows = self._conn().execute("SELECT key, detail FROM effects WHERE sample = ? ORDER BY rowid", (sample,))
        return [(key, detail) for key, detail in rows]
