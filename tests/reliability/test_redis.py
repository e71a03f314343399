"""The Redis/Valkey store under crashes and connection faults, on real ``valkey-server`` processes.

- SIGKILL mid-batch: a server with ``appendonly yes`` + ``appendfsync always`` is killed while a batch runs (in turn
  while a record's body runs, so its commit meets a dead server, and at whatever moment the worker has reached),
  restarted on the same port and data directory, and killed again right after each delivery returned. What was
  reported failed is redelivered (past the lock deadline, by an injected clock) until nothing fails. Every record
  of every delivery is COMPLETE after the crash that followed it, or was reported failed in it; every effect ran,
  and an effect ran twice only for a record whose body was in flight at a kill (at most one per kill: one worker).
- A connection fault at each store call (acquire, complete, release: the ``EVALSHA`` of their scripts; get: its
  ``HMGET``), of each kind: the connection reset before the request reaches the server, the server unreachable
  (connection refused), the answer lost after the server ran the request (once, or on every attempt), with
  redis-py's default retries and with none. Each record ends in one of the three ways in every delivery, and after
  redelivery each effect ran exactly once, except where the protocol cannot know: a commit that never reached
  the server (the body runs again once the lock lapses; the key is to be passed downstream).

Sizes: short under ``make test``, long under ``make reliability`` (the ``long_form`` fixture).
"""

from __future__ import annotations

import hashlib
import queue
import random
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from events import sqs_event, sqs_record
from harness import assert_nothing_lost, batch_with_duplicates, effects, failed_ids, key_of
from redis.backoff import ExponentialWithJitterBackoff
from redis_server import HOST, FaultProxy, ValkeyServer, start_standalone

from consumer import BatchProcessor, EventType, IdempotencyConfig, Item, Outcome
from persistence import PersistenceLayerError, RecordStatus
from persistence.redis import _ACQUIRE, _COMPLETE, _RELEASE, RedisPersistenceLayer
from samples.ledger import Ledger

CONFIG = IdempotencyConfig(lock_timeout_seconds=30)
LOCK_PASSED = 31  # seconds: a redelivery this much later finds any lock left by a failed call expired
MAX_ROUNDS = 30  # redeliveries before a scenario gives up on a record


def later(seconds: float):
    """A clock ``seconds`` ahead of this one: time travel instead of sleeping past a lock deadline."""
    return lambda: time.time() + seconds


# -- the two client settings ------------------------------------------------------------------------------

RETRIES = ("client retries", "no retries")


def client_for(port: int, retries: str) -> redis.Redis:
    """A redis-py client for ``port``: with redis-py's default ``Retry`` (on connection errors and timeouts), or
    with ``retry=None`` (one attempt per command)."""
    if retries == "client retries":
        return redis.Redis(host=HOST, port=port, socket_timeout=10)
    return redis.Redis(host=HOST, port=port, socket_timeout=10, retry=None)


def retries_of(client: redis.Redis) -> int:
    """How many times a connection of ``client`` retries a command that met a connection error."""
    connection = client.connection_pool.make_connection()
    try:
        return int(connection.retry.get_retries())
    finally:
        connection.disconnect()


def test_the_client_settings_retry_as_named(redis_server):
    # The scenarios below rest on these: redis-py's default client retries a command after a connection error
    # (the same request again, so the store's scripts must accept a retry under their own lease), retry=None
    # sends each command once (as redis-py's Redis.from_url client, which a store built from url= uses, does).
    with (
        client_for(redis_server.port, "client retries") as retrying,
        client_for(redis_server.port, "no retries") as single,
    ):
        assert retries_of(retrying) >= 1
        assert retries_of(single) == 0


# -- SIGKILL mid-batch --------------------------------------------------------------------------------------


class CrashingServer:
    """A durable ``valkey-server`` the test kills with SIGKILL and restarts on the same port and directory."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir()
        self.server: ValkeyServer = start_standalone(durable=True, directory=directory)
        self.port = self.server.port
        self.kills = 0

    def kill(self) -> None:
        self.server.kill()
        self.kills += 1

    def restart(self) -> None:
        self.server = self.server.restart()
        assert self.server.port == self.port

    def crash(self) -> None:
        """SIGKILL, then a restart from the append-only file."""
        self.kill()
        self.restart()

    def store(self, key_prefix: str) -> RedisPersistenceLayer:
        """A store on a fresh client of the running process (for checks; close its client after)."""
        return RedisPersistenceLayer(client=self.server.client(), key_prefix=key_prefix)


@pytest.fixture
def crashing(tmp_path):
    server = CrashingServer(tmp_path / "valkey")
    yield server
    server.server.cleanup()


def test_the_crashing_server_fsyncs_every_write(crashing):
    with crashing.server.client(decode_responses=True) as c:
        assert c.config_get("appendonly") == {"appendonly": "yes"}
        assert c.config_get("appendfsync") == {"appendfsync": "always"}


def test_without_the_append_only_file_a_sigkill_loses_acknowledged_commits(tmp_path):
    # What the durable scenario's check would catch: the same check on a server that persists nothing fails.
    directory = tmp_path / "volatile"
    directory.mkdir()
    server = start_standalone(directory=directory)
    try:
        with server.client() as client:
            store = RedisPersistenceLayer(client=client, key_prefix="volatile:")
            records = [sqs_record(f"msg-{i}", {"order": i}) for i in range(5)]
            processor = BatchProcessor(EventType.SQS, store=store, config=CONFIG)
            assert processor.process(sqs_event(*records), lambda record: "done")["batchItemFailures"] == []
        server.kill()
        server = server.restart()
        with server.client() as client:
            store = RedisPersistenceLayer(client=client, key_prefix="volatile:")
            with pytest.raises(AssertionError, match="neither COMPLETE nor reported failed"):
                assert_nothing_lost(store, {r["messageId"]: key_of(r, CONFIG) for r in records}, set())
    finally:
        server.cleanup()


class KillSchedule:
    """When the killer (the test's thread) kills the server during the deliveries, and which bodies were exposed.

    ``points`` are counts of bodies started (over every delivery). At a ``paused`` point the handler waits inside
    the body until the kill is done, so that record's commit meets a dead server; at the others the handler only
    signals and goes on, and the kill lands a moment later wherever the worker is (acquire, body or commit).
    With ``await_commit`` (a client that does not retry), the server comes back only once that commit failed,
    however late the worker got to it; a retrying client's later attempts may reach the restarted server.
    """

    def __init__(self, rng: random.Random, kills: int, bodies: int, *, await_commit: bool) -> None:
        self.rng = rng
        self.await_commit = await_commit
        self.commit_ended = threading.Event()  # set by the store (``SignallingStore``) as each commit call ends
        self.points = set(rng.sample(range(2, bodies), kills))
        self.paused_points = set(sorted(self.points)[::2])
        self.started: list[str] = []
        self.signals: queue.Queue[threading.Event | None] = queue.Queue()
        self.paused_records: list[str] = []  # bodies that were running while the server was killed
        self.exposed: set[str] = set()  # records whose body may have run without its commit landing
        self.mid_batch = 0

    def body_started(self, message_id: str) -> None:
        """Called by the handler in each body, after its effect."""
        self.started.append(message_id)
        if len(self.started) not in self.points:
            return
        if len(self.started) not in self.paused_points:
            self.signals.put(None)
            return
        resume = threading.Event()
        self.signals.put(resume)
        assert resume.wait(60), "the killer never resumed the paused body"

    def kill_while(self, worker: threading.Thread, server: CrashingServer) -> None:
        """Kill and restart the server at each point signalled while ``worker`` runs its delivery (a signal left
        when it ends is taken in the next delivery)."""
        while worker.is_alive():
            try:
                resume = self.signals.get(timeout=0.005)
            except queue.Empty:
                continue
            if resume is None:
                time.sleep(self.rng.uniform(0, 0.003))  # wherever the worker is by then
            before = len(self.started)
            server.kill()
            self.mid_batch += worker.is_alive()
            if resume is not None:
                self.paused_records.append(self.started[before - 1])
                self.commit_ended.clear()  # no commit is in flight: the one worker is in the paused body
                resume.set()  # the paused body returns now: its commit meets the dead server
                if self.await_commit:
                    assert self.commit_ended.wait(60), "the paused body's commit never ended"
            time.sleep(self.rng.uniform(0.005, 0.05))  # down for a moment (what the client meets meanwhile)
            # While the server is down no lock can be taken, so no body starts that was not in flight at the kill
            # (but one whose acquire was answered just before it).
            self.exposed.update(self.started[max(0, before - 1) :])
            server.restart()


class SignallingStore:
    """The store, setting ``ended`` as each ``complete`` call returns or raises."""

    def __init__(self, inner: RedisPersistenceLayer, ended: threading.Event) -> None:
        self.inner, self.ended = inner, ended

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def complete(self, record: Any) -> None:
        try:
            self.inner.complete(record)
        finally:
            self.ended.set()


@dataclass
class SigkillRun:
    """Deliveries to one worker while the killer kills the server, each followed by a crash and the check."""

    server: CrashingServer
    store: RedisPersistenceLayer
    schedule: KillSchedule
    keys: dict[str, str]
    handler: Any
    deliveries: int = 0
    reported_failed: int = 0
    lost: int = 0

    def deliver(self, batch: list[dict[str, Any]], clock: Any) -> set[str]:
        """One delivery of ``batch``, the server killed at the points it reaches; returns the ids reported failed."""
        processor = BatchProcessor(
            EventType.SQS,
            store=SignallingStore(self.store, self.schedule.commit_ended),
            config=CONFIG,
            clock=clock,
            raise_on_entire_batch_failure=False,
        )
        run: dict[str, Any] = {}

        def work() -> None:
            run["response"] = processor.process(sqs_event(*batch), self.handler)
            run["items"] = processor.items

        worker = threading.Thread(target=work)
        worker.start()
        self.schedule.kill_while(worker, self.server)
        worker.join()
        self.deliveries += len(batch)
        failed = failed_ids(run["response"])
        self.reported_failed += len(failed)
        check_ways(run["items"], failed)
        # A crash right after the invocation returned: whatever it reported succeeded is COMPLETE from the
        # append-only file; what it did not is in batchItemFailures (SQS redelivers it).
        self.server.crash()
        check = self.server.store(self.store.key_prefix)
        try:
            ids = {r["messageId"]: self.keys[r["messageId"]] for r in batch}
            self.lost += assert_nothing_lost(check, ids, failed)
        finally:
            check.client.close()
        return failed


@pytest.mark.slow
@pytest.mark.parametrize("retries", RETRIES)
def test_sigkill_mid_batch_loses_nothing_and_repeats_only_bodies_in_flight(
    crashing, tmp_path, long_form, retries, report
):
    unique, duplicates, kills = (400, 100, 12) if long_form else (60, 15, 4)
    records = batch_with_duplicates(unique, duplicates, seed=3)
    keys = {r["messageId"]: key_of(r, CONFIG) for r in records}
    ledger = Ledger(str(tmp_path / "ledger.sqlite3"))
    schedule = KillSchedule(random.Random(2024), kills, bodies=int(unique * 0.8), await_commit=retries == "no retries")

    def handler(record: Any) -> str:
        ledger.record("sigkill", record.message_id, "ran")
        schedule.body_started(record.message_id)
        return record.message_id

    client = client_for(crashing.port, retries)
    store = RedisPersistenceLayer(client=client, key_prefix=f"sigkill{uuid.uuid4().hex[:8]}:")
    run = SigkillRun(crashing, store, schedule, keys, handler)
    pending, rounds = records, 0
    try:
        while pending:
            assert rounds < MAX_ROUNDS, f"{len(pending)} records still failing after {MAX_ROUNDS} deliveries"
            failed = run.deliver(pending, later(rounds * LOCK_PASSED))
            pending = [r for r in pending if r["messageId"] in failed]
            rounds += 1
    finally:
        client.close()

    check = crashing.store(store.key_prefix)
    try:
        for message_id, key in keys.items():
            assert check.get(key).status is RecordStatus.COMPLETE, message_id
    finally:
        check.client.close()
    counts = effects(ledger, "sigkill")
    assert set(counts) == set(keys), "a record never ran"
    repeats = {message_id: n for message_id, n in counts.items() if n > 1}
    extra = sum(n - 1 for n in repeats.values())
    assert set(repeats) <= schedule.exposed, f"ran twice without being in flight at a kill: {repeats}"
    assert extra <= schedule.mid_batch  # one worker: at most one body in flight per kill
    assert schedule.mid_batch >= len(schedule.paused_points)  # every paused kill happened mid-batch
    if retries == "no retries":
        # Each paused body's commit met the dead server and was not retried: it ran again after its lock lapsed.
        # The documented limit (pass guard.key downstream), and the proof that these kills hit a body in flight.
        assert all(counts[message_id] >= 2 for message_id in schedule.paused_records)
    report(
        records=unique,
        deliveries=run.deliveries,
        duplicates=run.deliveries - unique,
        faults=f"{crashing.kills} SIGKILL ({schedule.mid_batch} mid-batch), {run.reported_failed} reported failed",
        double_effects=f"{extra} (in flight at a kill)",
        lost=run.lost,
    )


def check_ways(items: list[Item], failed: set[str]) -> None:
    """Each record of a delivery ended in one of the three ways: ran and committed, replayed, or reported failed.

    A message id is reported failed when any copy of it in the batch did not succeed (SQS redelivers it).
    """
    copies: dict[str, list[Outcome]] = {}
    for item in items:
        assert item.outcome is not None, item
        assert item.outcome.succeeded or item.error is not None or item.outcome is Outcome.SKIPPED, item
        copies.setdefault(item.item_id, []).append(item.outcome)
    for item_id, outcomes in copies.items():
        assert all(o in (Outcome.PROCESSED, Outcome.REPLAYED) or not o.succeeded for o in outcomes), outcomes
        assert (item_id in failed) is not all(o.succeeded for o in outcomes), (item_id, outcomes)
    assert failed <= set(copies)


# -- a connection fault at each store call ----------------------------------------------------------------

SCRIPTS = {"acquire": _ACQUIRE, "complete": _COMPLETE, "release": _RELEASE}
KINDS = ("reset", "refused", "lost_reply", "lost_replies")  # lost_replies: the answer to every attempt is lost
EVERY_ATTEMPT = 1000


def sha(source: str) -> bytes:
    """The SHA1 an ``EVALSHA`` of ``source`` sends (redis-py's ``register_script`` computes the same)."""
    return hashlib.sha1(source.encode()).hexdigest().encode()  # noqa: S324 - Redis names scripts by SHA1


@pytest.fixture
def no_backoff(monkeypatch):
    # Retries behave as redis-py's default Retry decides; only the waiting between them is skipped.
    monkeypatch.setattr(ExponentialWithJitterBackoff, "compute", lambda self, failures: 0)


@dataclass
class Rig:
    """The session's server, a fault proxy in front of it, a ledger, and a key prefix of the test's own."""

    server: ValkeyServer
    proxy: FaultProxy
    ledger: Ledger
    prefix: str

    def store(self, client: redis.Redis) -> RedisPersistenceLayer:
        return RedisPersistenceLayer(client=client, key_prefix=self.prefix)


@pytest.fixture
def rig(redis_server, tmp_path, no_backoff):
    proxy = FaultProxy(redis_server.port)
    with redis_server.client() as c:
        for source in SCRIPTS.values():  # loaded: the faulted EVALSHA runs (no NOSCRIPT and SCRIPT LOAD)
            c.script_load(source)
    yield Rig(redis_server, proxy, Ledger(str(tmp_path / "ledger.sqlite3")), f"t{uuid.uuid4().hex[:10]}:")
    proxy.close()


def arm(proxy: FaultProxy, markers: tuple[bytes, ...], kind: str) -> None:
    if kind == "lost_replies":
        proxy.arm(markers, "lost_reply", EVERY_ATTEMPT)
    else:
        proxy.arm(markers, kind)


# What the faulted record's first delivery ends as, and how many times its effect ran in the end.
#   (call, kind, retries) -> (first delivery succeeded, stored status after it or None, effects after redelivery)
IN, DONE = RecordStatus.IN_PROGRESS, RecordStatus.COMPLETE


def expected(call: str, kind: str, retries: str) -> tuple[bool, RecordStatus | None, int]:
    retried_away = retries == "client retries" and kind in ("reset", "lost_reply")
    reached = kind.startswith("lost_")  # the server ran the request
    if call == "acquire":
        if retried_away:
            return True, DONE, 1
        return False, IN if reached else None, 1  # the body never ran; a lock it wrote lapses at its deadline
    if call == "complete":
        if retried_away:
            return True, DONE, 1
        if reached:
            return False, DONE, 1  # committed: the redelivery replays it
        return False, IN, 2  # the commit never reached the server: the body runs again after the deadline
    # release: the body raised (the record fails whatever happens); the lock is gone unless the delete never ran
    return False, None if retried_away or reached else IN, 1


@dataclass
class Deliveries:
    """Deliver a batch through the proxy, and redeliver what is reported failed (each time past the lock deadlines
    of the last, by the clock) until nothing is. After each delivery: check it ended every record one of the three
    ways, then ``after(items, failed)`` (by default: drop the faults still planned, listen again)."""

    rig: Rig
    store: RedisPersistenceLayer
    handler: Any
    after: Any = None
    deliveries: int = 0
    lost: int = 0

    def until_done(self, records: list[dict[str, Any]], max_rounds: int = MAX_ROUNDS) -> None:
        check = self.rig.store(self.rig.server.client())
        pending: list[dict[str, Any]] = records
        try:
            for rounds in range(max_rounds):
                if not pending:
                    return
                processor = BatchProcessor(
                    EventType.SQS,
                    store=self.store,
                    config=CONFIG,
                    clock=later(rounds * LOCK_PASSED),
                    raise_on_entire_batch_failure=False,
                )
                failed = failed_ids(processor.process(sqs_event(*pending), self.handler))
                self.deliveries += len(pending)
                check_ways(processor.items, failed)
                self.lost += assert_nothing_lost(check, {r["messageId"]: key_of(r, CONFIG) for r in pending}, failed)
                (self.after or self.clear)(processor.items, failed)
                pending = [r for r in pending if r["messageId"] in failed]
            assert not pending, f"still failing after {max_rounds} deliveries: {[r['messageId'] for r in pending]}"
        finally:
            check.client.close()

    def clear(self, items: list[Item], failed: set[str]) -> None:  # noqa: ARG002 - an ``after``
        self.rig.proxy.disarm()  # a fault planned for a call that did not happen (a replay) is dropped
        self.rig.proxy.listen()

    def all_complete(self, records: list[dict[str, Any]]) -> None:
        check = self.rig.store(self.rig.server.client())
        try:
            for record in records:
                assert check.get(key_of(record, CONFIG)).status is RecordStatus.COMPLETE, record["messageId"]
        finally:
            check.client.close()


@pytest.mark.parametrize("retries", RETRIES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("call", list(SCRIPTS))
def test_fault_at_one_call_ends_the_record_one_of_three_ways(rig, call, kind, retries, report):
    records = [sqs_record(f"msg-{i}", {"order": i}) for i in range(3)]
    target = records[1]
    key = key_of(target, CONFIG)
    raised: set[str] = set()

    def handler(record: Any) -> str:
        if call == "release" and record.message_id == target["messageId"] and not raised:
            raised.add(record.message_id)
            raise RuntimeError("downstream refused")  # before any effect: the guard releases the lock
        rig.ledger.record("faults", record.message_id, "ran")
        return "ok"

    def after(items: list[Item], failed: set[str]) -> None:
        if run.deliveries == len(records):  # the first delivery
            assert rig.proxy.total >= 1, "the fault was never injected"
            check = rig.store(rig.server.client())
            try:
                check_first_delivery(items[1], check.get(key), failed, case=(call, kind, retries))
            finally:
                check.client.close()
        run.clear(items, failed)

    arm(rig.proxy, (sha(SCRIPTS[call]), key.encode()), kind)
    client = client_for(rig.proxy.port, retries)
    run = Deliveries(rig, rig.store(client), handler, after=after)
    try:
        run.until_done(records, max_rounds=5)
    finally:
        client.close()
    run.all_complete(records)
    twice = expected(call, kind, retries)[2]
    assert effects(rig.ledger, "faults") == {"msg-0": 1, "msg-1": twice, "msg-2": 1}
    report(
        records=len(records),
        deliveries=run.deliveries,
        duplicates=run.deliveries - len(records),
        faults=f"{call}: {kind} x{rig.proxy.total}",
        double_effects=f"{twice - 1} (commit never reached the server)" if twice > 1 else 0,
        lost=run.lost,
    )


def check_first_delivery(item: Item, stored: Any, failed: set[str], *, case: tuple[str, str, str]) -> None:
    call, kind, retries = case
    succeeded, status, _ = expected(call, kind, retries)
    assert (item.item_id not in failed) is succeeded, item
    assert (None if stored is None else stored.status) is status
    if succeeded:
        return
    if call == "release":
        assert isinstance(item.error, RuntimeError)  # the body's error is what the record reports
        release_failed = not (retries == "client retries" and kind in ("reset", "lost_reply"))
        notes = getattr(item.error, "__notes__", [])
        assert any("releasing" in note for note in notes) is release_failed
        return
    # The store's error names the key and chains redis-py's connection error; the record is reported failed.
    assert isinstance(item.error, PersistenceLayerError)
    assert item.error.key == key_of(item.raw, CONFIG)
    assert isinstance(item.error.__cause__, redis.ConnectionError)


@pytest.mark.parametrize("retries", RETRIES)
@pytest.mark.parametrize("kind", KINDS)
def test_fault_on_get_returns_the_record_or_raises_naming_the_key(rig, kind, retries):
    record = sqs_record("msg-get", {"order": 1})
    key = key_of(record, CONFIG)
    with rig.server.client() as direct:
        processor = BatchProcessor(EventType.SQS, store=rig.store(direct))
        assert processor.process(sqs_event(record), lambda r: "ok")["batchItemFailures"] == []
    arm(rig.proxy, (b"HMGET", key.encode()), kind)
    with client_for(rig.proxy.port, retries) as client:
        store = rig.store(client)
        if retries == "client retries" and kind in ("reset", "lost_reply"):
            assert store.get(key).status is RecordStatus.COMPLETE
        else:
            with pytest.raises(PersistenceLayerError) as caught:
                store.get(key)
            assert caught.value.key == key
            assert isinstance(caught.value.__cause__, redis.ConnectionError)
        assert rig.proxy.total >= 1
        rig.proxy.disarm()
        rig.proxy.listen()
        assert store.get(key).status is RecordStatus.COMPLETE


# -- random faults over a larger batch ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("retries", RETRIES)
def test_random_connection_faults_at_every_call_nothing_lost(rig, long_form, retries, report):
    unique, duplicates = (300, 60) if long_form else (60, 15)
    rng = random.Random(17)
    records = batch_with_duplicates(unique, duplicates, seed=9)
    raised: set[str] = set()

    def handler(record: Any) -> str:
        if rng.random() < 0.1 and record.message_id not in raised:  # some bodies fail once: their locks are released
            raised.add(record.message_id)
            raise RuntimeError("downstream refused")
        rig.ledger.record("random", record.message_id, "ran")
        return "ok"

    def plan(batch: list[dict[str, Any]]) -> None:
        # Faults for a third of the records of the next delivery, each at one of its calls.
        for r in rng.sample(batch, max(1, len(batch) // 3)):
            call, kind = rng.choice(list(SCRIPTS)), rng.choice(("reset", "lost_reply"))
            rig.proxy.arm((sha(SCRIPTS[call]), key_of(r, CONFIG).encode()), kind)

    client = client_for(rig.proxy.port, retries)
    pending = records

    def next_delivery(items: list[Item], failed: set[str]) -> None:
        nonlocal pending
        pending = [r for r in pending if r["messageId"] in failed]
        rig.proxy.disarm()  # a fault planned for a call that did not happen (a replay) is dropped
        if pending:
            plan(pending)

    plan(records)
    run = Deliveries(rig, rig.store(client), handler, after=next_delivery)
    try:
        run.until_done(records)
    finally:
        client.close()
    run.all_complete(records)
    counts = effects(rig.ledger, "random")
    assert set(counts) == {r["messageId"] for r in records}
    extra = sum(n - 1 for n in counts.values())
    complete = sha(_COMPLETE)
    resets_on_commit = sum(1 for markers, kind in rig.proxy.history if kind == "reset" and markers[0] == complete)
    # A body runs again only after a commit that never reached the server, and only without retries: then each
    # reset commit is exactly one body run again. A reset retried away and every lost answer (to an acquire, a
    # commit or a release, retried or not) cost nothing.
    assert extra == (resets_on_commit if retries == "no retries" else 0)
    injected = rig.proxy.injected
    report(
        records=unique,
        deliveries=run.deliveries,
        duplicates=run.deliveries - unique,
        faults=f"{rig.proxy.total} ({injected['reset']} reset, {injected['lost_reply']} reply lost)",
        double_effects=f"{extra} (commit never reached the server)" if extra else 0,
        lost=run.lost,
    )
