"""The operator commands, run as a real subprocess against SQLite, DynamoDB Local and Redis (a delete racing a
commit runs in this process, against every store)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from consumer import AlreadyProcessed, IdempotencyConfig, IdempotencyGuard
from consumer.cli import _records as _cli_records
from consumer.cli import main as cli_main
from persistence import (
    DynamoDBPersistenceLayer,
    IdempotencyRecord,
    RecordStatus,
    SQLitePersistenceLayer,
    store_from_url,
)

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "samples" / "events"


def cli(*args, stdin="", cwd=ROOT, env=None):
    inherited = {k: v for k, v in os.environ.items() if k != "IDEMPOTENCY_STORE_URL"}  # the test decides
    env = {**inherited, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "consumer.cli", *args], capture_output=True, text=True, env=env,
                          input=stdin, cwd=cwd, timeout=60, check=False)  # fmt: skip


@pytest.fixture(params=["sqlite", "dynamodb", "redis", "redis-cluster"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/records.sqlite3"
    if request.param.startswith("redis"):
        # Its own prefix: `records list` must show this test's records and no other test's on the same server.
        server = request.getfixturevalue("redis_server" if request.param == "redis" else "redis_cluster")
        cluster = "&cluster=true" if request.param == "redis-cluster" else ""
        return f"{server.url}?key_prefix=cli-{tmp_path.name}:{cluster}"
    server = request.getfixturevalue("ddb_server")
    return f"dynamodb://{server.create_table()}?endpoint_url={server.endpoint_url}&region=us-east-1"


@pytest.fixture
def seeded(store_url):
    """Four records: complete, live lock, stuck lock (holder crashed), expired complete."""
    store, now = store_from_url(store_url), int(time.time())
    records = {
        "complete": IdempotencyRecord("fn#complete", RecordStatus.COMPLETE, now + 3600, None, "l1", '{"charged":30}'),
        "live": IdempotencyRecord("fn#live", RecordStatus.IN_PROGRESS, now + 3600, (now + 600) * 1000, "l2"),
        "stuck": IdempotencyRecord("fn#stuck", RecordStatus.IN_PROGRESS, now + 3600, (now - 5) * 1000, "l3"),
        "expired": IdempotencyRecord("fn#expired", RecordStatus.COMPLETE, now - 10, None, "l4", "0"),
    }
    for record in records.values():
        status = record.status
        held = IdempotencyRecord(
            record.key, RecordStatus.IN_PROGRESS, record.expires_at, record.in_progress_expires_at or 0, record.lease
        )
        assert store.acquire(held, (now - 100) * 1000) is None
        if status is RecordStatus.COMPLETE:
            store.complete(record)
    return store_url, store


def keys_listed(result):
    return sorted(json.loads(line)["key"] for line in result.stdout.splitlines())


def test_list_shows_every_record_with_its_effective_status(seeded):
    url, _ = seeded
    result = cli("records", "list", "--store", url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["KEY", "STATUS", "EXPIRES", "LOCK", "DEADLINE", "RESPONSE"]
    assert lines[-1] == "(4 records)"
    row = next(line for line in lines if line.startswith("fn#complete"))
    assert "COMPLETE" in row
    assert "14 B" in row
    assert "EXPIRED" in next(line for line in lines if line.startswith("fn#expired"))
    assert "ago" in next(line for line in lines if line.startswith("fn#stuck"))


@pytest.mark.parametrize(
    ("status", "expected"),
    [("COMPLETE", ["fn#complete"]), ("IN_PROGRESS", ["fn#live", "fn#stuck"]), ("EXPIRED", ["fn#expired"])],
)
def test_list_filters_by_status_as_json_lines(seeded, status, expected):
    url, _ = seeded
    result = cli("records", "list", "--store", url, "--status", status, "--json")
    assert result.returncode == 0, result.stderr
    assert keys_listed(result) == expected
    assert {json.loads(line)["status"] for line in result.stdout.splitlines()} == {status}


def test_list_limit(seeded):
    url, _ = seeded
    assert len(cli("records", "list", "--store", url, "--limit", "2", "--json").stdout.splitlines()) == 2


def test_stuck_lists_only_locks_past_their_deadline(seeded):
    url, _ = seeded
    assert keys_listed(cli("records", "stuck", "--store", url, "--json")) == ["fn#stuck"]


def iso(epoch_ms):
    return (
        datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def test_show_pretty_prints_the_response(seeded):
    url, store = seeded
    result = cli("records", "show", "fn#complete", "--store", url)
    assert result.returncode == 0
    assert 'response:\n  {\n    "charged": 30\n  }\n' in result.stdout
    # One status (the effective one), and every time in ISO 8601 UTC beside its epoch number and a span.
    fields = dict(line.split(":", 1) for line in result.stdout.split("\nresponse:")[0].splitlines())
    assert [name for name in fields if "status" in name] == ["status"]
    assert fields["status"].strip() == "COMPLETE"
    expires_at = store.get("fn#complete").expires_at
    assert fields["expires_at"].strip().startswith(f"{iso(expires_at * 1000)} (epoch s {expires_at}, in 59m ")
    assert fields["lock_deadline"].strip() == "-"
    live = cli("records", "show", "fn#live", "--store", url).stdout
    deadline = store.get("fn#live").in_progress_expires_at
    assert f"lock_deadline:          {iso(deadline)} (epoch ms {deadline}, in " in live
    expired = cli("records", "show", "fn#expired", "--store", url).stdout
    assert "status:                 EXPIRED (stored as COMPLETE)\n" in expired


def test_show_of_a_missing_key_exits_1(seeded):
    url, _ = seeded
    result = cli("records", "show", "fn#nothing", "--store", url)
    assert (result.returncode, result.stderr) == (1, "idempotent-consumer: no record 'fn#nothing'\n")


def test_delete_asks_first(seeded):
    url, store = seeded
    refused = cli("records", "delete", "fn#stuck", "--store", url, stdin="n\n")
    assert refused.returncode == 1
    assert "[y/N]" in refused.stdout
    assert store.get("fn#stuck") is not None
    accepted = cli("records", "delete", "fn#stuck", "--store", url, stdin="y\n")
    assert accepted.returncode == 0
    assert store.get("fn#stuck") is None


def test_delete_yes_and_missing(seeded):
    url, store = seeded
    assert cli("records", "delete", "fn#complete", "--store", url, "--yes").stdout == "deleted fn#complete\n"
    assert store.get("fn#complete") is None
    assert cli("records", "delete", "fn#complete", "--store", url, "--yes").returncode == 1


def test_key_shows_selection_and_key_per_record():
    result = cli("key", "--event", str(EVENTS / "sqs_orders.json"), "--jmespath", "powertools_json(body).order_id",
                 "--prefix", "orders")  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == 'record 0: selected "o-1001"'
    assert lines[1].startswith("  key orders#")
    assert lines[1] == lines[5]  # o-1001 twice: the same key
    default = cli("key", "--event", str(EVENTS / "kinesis_clickstream.json")).stdout.splitlines()
    arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/clicks"  # an eventID is unique within its stream only
    assert default[0] == f'record 0: selected ["{arn}","shardId-000000000000:4959{1:020d}"]'
    eventbridge = cli("key", "--event", str(EVENTS / "eventbridge_target.json")).stdout.splitlines()
    assert eventbridge[0] == 'record 0: selected "6a7e8feb-b491-4cf7-a9f1-bf3703467718"'


def test_key_understands_kafka_events_by_default_and_by_header():
    default = cli("key", "--event", str(EVENTS / "kafka_orders.json")).stdout.splitlines()
    cluster = json.loads((EVENTS / "kafka_orders.json").read_text())["eventSourceArn"]
    assert default[0] == f'record 0: selected ["{cluster}","orders",0,10]'
    assert len([line for line in default if line.startswith("  key local#")]) == 6
    by_header = cli("key", "--event", str(EVENTS / "kafka_orders.json"), "--header", "IDEMPOTENCY-KEY").stdout
    lines = by_header.splitlines()
    assert lines[0] == 'record 0: selected "k-3001"'
    assert lines[4] == 'record 2: selected "k-3001"'  # the producer's retry, at another offset
    assert lines[1] == lines[5]  # the same key


def test_key_refuses_an_event_without_records_of_the_type_asked_for():
    result = cli("key", "--event", str(EVENTS / "kafka_orders.json"), "--event-type", "sqs")
    assert (result.returncode, result.stdout) == (1, "")
    assert "the event has no records of its own for --event-type sqs" in result.stderr


def test_key_reports_records_whose_expression_fails():
    result = cli("key", "--event", str(EVENTS / "kinesis_clickstream.json"),
                 "--jmespath", "powertools_json(powertools_base64(kinesis.data)).click_id")  # fmt: skip
    assert "record 4: event_key_jmespath" in result.stdout
    assert result.stdout.count("  key local#") == 5


def test_table_create_is_idempotent_and_enables_ttl(ddb_server):
    args = ["table", "create", "--table", "Idem", "--endpoint-url", ddb_server.endpoint_url, "--region", "us-east-1"]
    first, second = cli(*args), cli(*args)
    assert (first.returncode, first.stdout) == (0, "created Idem (key id, TTL on expiration)\n"), first.stderr
    assert (second.returncode, second.stdout) == (0, "table exists: Idem (key id, TTL on expiration)\n")
    client = ddb_server.client()
    ttl = client.describe_time_to_live(TableName="Idem")["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiration"}
    composite = cli("table", "create", "--table", "IdemSK", "--sort-key", "--endpoint-url", ddb_server.endpoint_url,
                    "--region", "us-east-1")  # fmt: skip
    assert composite.returncode == 0
    schema = client.describe_table(TableName="IdemSK")["Table"]["KeySchema"]
    assert [k["AttributeName"] for k in schema] == ["id", "sort_key"]


def test_errors_are_one_line_with_usage_exit_2():
    bad_url = cli("records", "list", "--store", "memcached://x")
    assert (bad_url.returncode, bad_url.stderr.count("\n")) == (2, 1)
    assert cli("records", "list", "--status", "DONE").returncode == 2
    assert cli("records").returncode == 2
    unreachable = cli("records", "list", "--store", "dynamodb://T?endpoint_url=http://127.0.0.1:9&region=us-east-1")
    assert unreachable.returncode == 1
    assert "Traceback" not in unreachable.stderr
    assert unreachable.stderr.startswith("idempotent-consumer: PersistenceLayerError: DynamoDB scan failed")


def test_every_command_has_help_with_examples():
    for command in (["records", "list"], ["records", "show"], ["records", "delete"], ["records", "stuck"], ["key"],
                    ["table", "create"], ["invoke"]):  # fmt: skip
        result = cli(*command, "--help")
        assert result.returncode == 0, command
        assert "examples:" in result.stdout, command


def test_delete_refuses_a_live_lock_naming_its_holder_and_deadline(seeded):
    url, store = seeded
    live = store.get("fn#live")
    for flags in (["--yes"], []):
        result = cli("records", "delete", "fn#live", "--store", url, *flags, stdin="y\n")
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1, result.stderr
        assert "[y/N]" not in result.stdout  # refused before asking
        message = result.stderr
        assert "'fn#live'" in message
        assert "lease l2" in message
        assert str(live.in_progress_expires_at) in message
        deadline = datetime.fromtimestamp(live.in_progress_expires_at / 1000, tz=timezone.utc)
        assert deadline.isoformat(timespec="milliseconds").replace("+00:00", "Z") in message
        span = re.search(r", in (?:(\d+)m )?(\d+)s\)", message)  # at most 10 minutes from now, as a span
        assert span, message
        assert 0 < 60 * int(span[1] or 0) + int(span[2]) <= 600, message
        assert "--force" in message
    assert store.get("fn#live") == live


def test_delete_force_deletes_a_live_lock(seeded):
    url, store = seeded
    result = cli("records", "delete", "fn#live", "--store", url, "--yes", "--force")
    assert (result.returncode, result.stdout) == (0, "deleted fn#live\n"), result.stderr
    assert store.get("fn#live") is None


def test_delete_force_without_yes_warns_then_asks(seeded):
    url, store = seeded
    refused = cli("records", "delete", "fn#live", "--store", url, "--force", stdin="n\n")
    assert refused.returncode == 1
    assert "live" in refused.stdout
    assert "[y/N]" in refused.stdout
    assert store.get("fn#live") is not None
    assert cli("records", "delete", "fn#live", "--store", url, "--force", stdin="y\n").returncode == 0
    assert store.get("fn#live") is None


def test_delete_of_an_expired_lock_or_a_complete_record_needs_no_force(seeded):
    url, store = seeded
    for key in ("fn#stuck", "fn#complete", "fn#expired"):
        result = cli("records", "delete", key, "--store", url, "--yes")
        assert (result.returncode, result.stdout) == (0, f"deleted {key}\n"), result.stderr
        assert store.get(key) is None


@pytest.mark.parametrize(
    ("meanwhile", "why"), [("acquired", "it was acquired again"), ("committed", "its holder committed it")]
)
def test_delete_refuses_a_record_that_changed_since_it_was_read(seeded, meanwhile, why):
    # While the command waits for its answer, another invocation takes the stuck lock over, or its holder (slow,
    # not crashed) commits it.
    url, store = seeded
    stuck = store.get("fn#stuck")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "consumer.cli", "records", "delete", "fn#stuck", "--store", url]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=ROOT) as process:  # fmt: skip
        assert process.stdout is not None
        _read_until(process.stdout, "[y/N] ")  # the command has read the lock
        now_ms = int(time.time() * 1000)
        if meanwhile == "committed":
            now = stuck.completed('{"charged":30}', now_ms // 1000 + 3600)
            store.complete(now)
        else:
            now = IdempotencyRecord.in_progress("fn#stuck", expires_at=now_ms // 1000 + 3600,
                                                lock_deadline_ms=now_ms + 60_000)  # fmt: skip
            assert store.acquire(now, now_ms) is None
        _, stderr = process.communicate("y\n", timeout=60)
    assert process.returncode == 1
    assert stderr.count("\n") == 1, stderr
    assert f"nothing deleted: 'fn#stuck' changed since it was read ({why} meanwhile)" in stderr
    assert f"it was IN_PROGRESS under lease l3, it is now {now.status.value} under lease {now.lease}" in stderr
    assert store.get("fn#stuck") == now


def _read_until(stream, marker: str) -> str:
    text = ""
    while not text.endswith(marker):
        char = stream.read(1)
        assert char, f"the command ended before printing {marker!r}: {text!r}"
        text += char
    return text


def _write_foreign(url: str, key: str) -> None:
    """Another library's item (status PENDING), written straight into the table or file."""
    store = store_from_url(url)
    if isinstance(store, SQLitePersistenceLayer):
        store.get("nothing")  # creates the file and its table
        with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute("INSERT INTO records (key, status, expires_at, lease) VALUES (?, 'PENDING', ?, 'x')",
                         (key, int(time.time()) + 3600))  # fmt: skip
        return
    if hasattr(store, "key_prefix"):  # Redis: another library's hash under our prefix
        store.client.hset(store.key_prefix + key, mapping={"status": "PENDING", "expires_at": int(time.time()) + 3600})
        return
    assert isinstance(store, DynamoDBPersistenceLayer)
    expiry = str(int(time.time()) + 3600)
    item = {"id": {"S": key}, "status": {"S": "PENDING"}, "expiration": {"N": expiry}}
    store.client.put_item(TableName=store.table_name, Item=item)


@pytest.mark.parametrize("command", [["list"], ["list", "--json"], ["show", "fn#foreign"], ["delete", "fn#foreign"]])
def test_a_foreign_item_is_a_one_line_error_naming_its_key(seeded, command):
    url, _ = seeded
    _write_foreign(url, "fn#foreign")
    result = cli("records", *command, "--store", url, *(["--yes"] if command[0] == "delete" else []))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("idempotent-consumer: PersistenceLayerError:")
    assert "'fn#foreign'" in result.stderr


def test_list_and_show_a_response_holding_a_lone_surrogate(ddb_server):
    # DynamoDB stores a lone surrogate as it is (SQLite refuses it); the commands must still print it.
    url = f"dynamodb://{ddb_server.create_table()}?endpoint_url={ddb_server.endpoint_url}&region=us-east-1"
    store, now = store_from_url(url), int(time.time())
    held = IdempotencyRecord.in_progress("fn#odd", expires_at=now + 3600, lock_deadline_ms=(now + 60) * 1000)
    store.acquire(held, now * 1000)
    store.complete(held.completed('"\ud83d"', now + 3600))
    table = cli("records", "list", "--store", url)
    assert (table.returncode, table.stderr) == (0, "")
    assert "5 B" in table.stdout  # the surrogate counted as 3 bytes, as the item size check counts it
    lines = cli("records", "list", "--json", "--store", url)
    assert lines.returncode == 0, lines.stderr
    assert json.loads(json.loads(lines.stdout)["response"]) == "\ud83d"
    shown = cli("records", "show", "fn#odd", "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert '"\\ud83d"' in shown.stdout


RECORDS_COMMANDS = [
    ["list"],
    ["list", "--json"],
    ["show", "fn#complete"],
    ["delete", "fn#complete", "--yes"],
    ["stuck"],
]


@pytest.mark.parametrize("command", RECORDS_COMMANDS, ids=" ".join)
def test_records_on_a_sqlite_file_that_does_not_exist_fail_and_create_nothing(tmp_path, command):
    absent = tmp_path / "typo.sqlite3"
    result = cli("records", *command, "--store", f"sqlite:///{absent}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"idempotent-consumer: the SQLite store '{absent}' does not exist")
    assert list(tmp_path.iterdir()) == []  # no file, no -wal or -shm beside it


@pytest.mark.parametrize("command", RECORDS_COMMANDS, ids=" ".join)
@pytest.mark.parametrize("kind", ["an application's database", "an empty file"])
def test_records_on_a_sqlite_file_that_is_not_a_store_fail_and_leave_it_as_it_was(tmp_path, command, kind):
    other = tmp_path / "app.db"
    if kind == "an empty file":
        other.touch()
    else:
        with contextlib.closing(sqlite3.connect(other)) as connection:
            connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
            connection.commit()
    before = other.read_bytes()
    result = cli("records", *command, "--store", f"sqlite:///{other}", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"'{other}' is a SQLite file but not an idempotency store" in result.stderr
    assert other.read_bytes() == before  # no table created, not switched to WAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_records_without_a_store_name_the_default_file_and_the_directory_it_was_looked_for_in(tmp_path):
    result = cli("records", "list", cwd=tmp_path)
    assert result.returncode == 1
    assert f"the SQLite store '.idempotency.sqlite3' (in {tmp_path}) does not exist" in result.stderr
    assert "--store" in result.stderr
    assert list(tmp_path.iterdir()) == []
    in_a_missing_directory = cli("records", "stuck", "--store", "sqlite:///no/such/dir/records.sqlite3", cwd=tmp_path)
    assert in_a_missing_directory.returncode == 1
    assert "'no/such/dir/records.sqlite3'" in in_a_missing_directory.stderr
    assert "does not exist" in in_a_missing_directory.stderr


def test_records_read_the_store_url_variable_and_the_option_wins_over_it(tmp_path):
    url = f"sqlite:///{tmp_path}/records.sqlite3"
    store, now = store_from_url(url), int(time.time())
    held = IdempotencyRecord.in_progress("fn#mine", expires_at=now + 3600, lock_deadline_ms=(now + 60) * 1000)
    assert store.acquire(held, now * 1000) is None
    listed = cli("records", "list", "--json", cwd=tmp_path, env={"IDEMPOTENCY_STORE_URL": url})
    assert (listed.returncode, keys_listed(listed)) == (0, ["fn#mine"]), listed.stderr
    missing = f"sqlite:///{tmp_path}/other.sqlite3"
    overridden = cli("records", "list", "--store", missing, cwd=tmp_path, env={"IDEMPOTENCY_STORE_URL": url})
    assert overridden.returncode == 1
    assert "other.sqlite3' does not exist" in overridden.stderr
    from_variable = cli("records", "list", cwd=tmp_path, env={"IDEMPOTENCY_STORE_URL": missing})
    assert "other.sqlite3' does not exist" in from_variable.stderr
    assert not (tmp_path / "other.sqlite3").exists()


# -- the holder commits while the command waits: only the record read is deleted ----------------------------


class _ReadThen:
    """The store as the command sees it: each ``get`` returns what it read, then runs ``then`` (the window between
    the read and the delete, where ``--yes`` asks no question)."""

    def __init__(self, store, then):
        self._store, self._then = store, then

    def get(self, key):
        record = self._store.get(key)
        self._then()
        return record

    def __getattr__(self, name):
        return getattr(self._store, name)


class _Answer:
    """The operator's standard input: ``y``, typed once ``then`` has run (the question is on the screen)."""

    def __init__(self, then):
        self._then = then

    def readline(self):
        self._then()
        return "y\n"


@pytest.mark.parametrize(
    "case",
    [
        ("past its deadline", [], "prompt"),  # the holder was slow, not dead
        ("live", ["--force"], "prompt"),
        ("past its deadline", ["--yes"], "read"),
        ("live", ["--force", "--yes"], "read"),
    ],
    ids=["lock-past-deadline-asked", "live-lock-force-asked", "lock-past-deadline-yes", "live-lock-force-yes"],
)
def test_delete_leaves_a_lock_its_holder_committed_while_the_command_waited(store_factory, monkeypatch, capsys, case):
    # A real guard holds the lock, its body waiting; the command reads the lock; the body ends and the guard commits
    # (during the prompt, or between the read and the delete); then the command deletes. The commit must stand, and
    # the next delivery replay it.
    lock, flags, window = case
    store, order, runs = store_factory(), {"order_id": "o-1"}, []
    config = IdempotencyConfig(event_key_jmespath="order_id", lock_timeout_seconds=60)
    started = time.time() - (120 if lock == "past its deadline" else 0)  # a lock taken 2 minutes ago lapsed 1 ago
    entered, body_may_end, keys = threading.Event(), threading.Event(), []

    def holder():
        with IdempotencyGuard(order, store=store, config=config, clock=lambda: started) as guard:
            keys.append(guard.key)
            entered.set()
            assert body_may_end.wait(timeout=60)
            runs.append("holder")
            guard.result = {"charged": 30}

    thread = threading.Thread(target=holder)
    thread.start()
    assert entered.wait(timeout=60)
    key = keys[0]
    lock_read = store.get(key)
    assert lock_read.status is RecordStatus.IN_PROGRESS

    def commit():
        body_may_end.set()
        thread.join(timeout=60)
        assert store.get(key).status is RecordStatus.COMPLETE  # committed before the command goes on

    seen = store_factory()  # the command's own store (its own client or connection), as in a process of its own
    monkeypatch.setattr(
        _cli_records, "open_store", lambda *_, **__: _ReadThen(seen, commit) if window == "read" else seen
    )
    monkeypatch.setattr(sys, "stdin", _Answer(commit))
    code = cli_main(["records", "delete", key, "--store", "unused", *flags])
    printed = capsys.readouterr()

    assert not thread.is_alive()
    assert code == 1
    assert ("[y/N] " in printed.out) == (window == "prompt")
    assert "deleted" not in printed.out
    assert printed.err.count("\n") == 1, printed.err
    assert printed.err == (
        f"idempotent-consumer: nothing deleted: {key!r} changed since it was read (its holder committed it "
        f"meanwhile): it was IN_PROGRESS under lease {lock_read.lease}, it is now COMPLETE under lease "
        f"{lock_read.lease}; run the command again to see it as it is now\n"
    )
    committed = store.get(key)
    assert (committed.status, committed.lease) == (RecordStatus.COMPLETE, lock_read.lease)
    with pytest.raises(AlreadyProcessed) as replayed, IdempotencyGuard(order, store=store, config=config):
        runs.append("redelivery")  # the next delivery: replayed, not run
    assert replayed.value.response == {"charged": 30}
    assert runs == ["holder"]
