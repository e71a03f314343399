"""The SQLite store's files are private, the ``records`` commands that read change nothing, and what they print of a
store's contents stays on its lines.

Run as real subprocesses on real files: the umask is the process's own, and the commands are what an operator runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from consumer._reports import one_line
from persistence import IdempotencyRecord, PersistenceLayerError, RecordStatus, SQLitePersistenceLayer

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "o-7\n[INFO]\tforged line\r\x1b[31mred\x1b[0m\x85\x9b\u2028\u2029\u202etxt.exe\u2066\u200f"
READS = [["list"], ["list", "--json"], ["stuck"], ["show", "fn#complete"]]

WRITE_UNDER_UMASK_022 = r"""
import os, stat, sys, time
from persistence import IdempotencyRecord, SQLitePersistenceLayer
os.umask(0o022)
store = SQLitePersistenceLayer(sys.argv[1])
now = int(time.time())
held = IdempotencyRecord.in_progress("fn#1", expires_at=now + 60, lock_deadline_ms=now * 1000 + 60_000)
assert store.acquire(held, now * 1000) is None  # the file, then its -wal and -shm, made by this write
modes = {p: oct(stat.S_IMODE(os.stat(p).st_mode)) for p in sorted(os.listdir(".")) if p.startswith(sys.argv[1])}
print(modes)
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("IDEMPOTENCY_STORE_URL", None)
    return subprocess.run([sys.executable, "-m", "consumer.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=60, check=False)  # fmt: skip


def test_the_store_and_its_wal_and_shm_are_created_readable_by_their_owner_only(tmp_path):
    # Responses are stored in clear: under the usual umask (022) SQLite would create all three 0644.
    run = subprocess.run(
        [sys.executable, "-c", WRITE_UNDER_UMASK_022, "records.sqlite3"], cwd=tmp_path, capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    modes = eval(run.stdout)  # noqa: S307 - our own child's dict of str
    assert modes == {"records.sqlite3": "0o600", "records.sqlite3-shm": "0o600", "records.sqlite3-wal": "0o600"}


def test_an_existing_file_keeps_its_mode_and_a_missing_directory_is_a_store_error(tmp_path):
    shared = tmp_path / "shared.sqlite3"
    shared.touch(mode=0o640)
    shared.chmod(0o640)
    store = SQLitePersistenceLayer(shared)
    assert store.get("fn#1") is None
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640  # chosen by its owner
    store.close()
    with pytest.raises(PersistenceLayerError, match="cannot open the SQLite store"):
        SQLitePersistenceLayer(tmp_path / "no" / "such.sqlite3").get("fn#1")


def application_database(path: Path) -> None:
    """Another application's database, in its own journal mode, that happens to have a ``records`` table."""
    now = int(time.time())
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute(
            "CREATE TABLE records (key TEXT PRIMARY KEY, status TEXT NOT NULL, expires_at INTEGER NOT NULL,"
            " in_progress_expires_at INTEGER, lease TEXT NOT NULL, response TEXT, payload_hash TEXT)"
        )
        rows = [
            ("fn#complete", "COMPLETE", now + 3600, None, HOSTILE, json.dumps({"note": HOSTILE}), None),
            (f"fn#{HOSTILE}", "IN_PROGRESS", now + 3600, (now - 5) * 1000, "l-2", None, None),
        ]
        connection.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        connection.commit()


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_reading_command_on_an_applications_database_changes_nothing_and_prints_its_rows_escaped(tmp_path, command):
    other = tmp_path / "app.db"
    application_database(other)
    before = other.read_bytes()
    result = cli("records", *command, "--store", f"sqlite:///{other}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert other.read_bytes() == before  # no table created, not switched to WAL (header bytes 18-19 stay 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm
    with contextlib.closing(sqlite3.connect(other)) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert not any(one_line(line) != line for line in result.stdout.splitlines())  # every line escaped
    assert result.stdout.count("\n") == len(result.stdout.splitlines())  # no U+2028, NEL or \r splits a line
    if command == ["list", "--json"]:
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert sorted(row["key"] for row in rows) == sorted(["fn#complete", f"fn#{HOSTILE}"])  # read back exactly
        assert {row["lease"] for row in rows} == {HOSTILE, "l-2"}
    if command == ["show", "fn#complete"]:
        assert f"lease:                  {one_line(HOSTILE)}" in result.stdout.splitlines()
        assert json.loads("\n".join(result.stdout.split("response:\n", 1)[1].splitlines())) == {"note": HOSTILE}
    if command == ["stuck"]:
        assert result.stdout.splitlines()[1].startswith(f"fn#{one_line(HOSTILE)}  IN_PROGRESS")


def test_records_delete_still_writes_to_the_store(tmp_path):
    store = SQLitePersistenceLayer(tmp_path / "records.sqlite3")
    now = int(time.time())
    held = IdempotencyRecord.in_progress("fn#1", expires_at=now + 60, lock_deadline_ms=(now - 5) * 1000)
    assert store.acquire(held, (now - 10) * 1000) is None
    store.close()
    result = cli("records", "delete", "fn#1", "--yes", "--store", "sqlite:///records.sqlite3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert SQLitePersistenceLayer(tmp_path / "records.sqlite3").get("fn#1") is None


def test_a_read_only_store_reads_and_refuses_every_write(tmp_path):
    path = tmp_path / "records.sqlite3"
    writer = SQLitePersistenceLayer(path)
    now = int(time.time())
    held = IdempotencyRecord.in_progress("fn#1", expires_at=now + 60, lock_deadline_ms=now * 1000 + 60_000)
    assert writer.acquire(held, now * 1000) is None
    reader = SQLitePersistenceLayer(path, read_only=True)
    assert reader.get("fn#1") == held  # beside a live writer, through its WAL
    assert [r.key for r in reader.scan(RecordStatus.IN_PROGRESS)] == ["fn#1"]
    with pytest.raises(PersistenceLayerError, match="readonly"):
        reader.release(held)
    with pytest.raises(PersistenceLayerError, match="unable to open"):
        SQLitePersistenceLayer(tmp_path / "absent.sqlite3", read_only=True).get("fn#1")
    assert not (tmp_path / "absent.sqlite3").exists()
