"""Records in Redis or Valkey (standalone, ElastiCache, MemoryDB, a cluster): one Lua script per transition.

Each record is one hash under ``{key_prefix}{record key}``; every script touches that one key, so the store works
unchanged on a cluster. Expiry is judged by the library's clock, as for every store; the key also gets a Redis
expiry, so finished records vanish on their own: set relative to the library's clock (``PEXPIRE`` of the time
left by that clock, plus a margin), never as an absolute time, so a server clock ahead of ours cannot drop a
record that still counts. A commit carries the remaining time over: the new expiry is the old key's remaining
time plus however much later the new ``expires_at`` is.

redis-py (or valkey-py, which has the same interface) is an optional dependency: ``idempotent-consumer[redis]``.
Importing :mod:`persistence` never imports it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import itertools
import threading
from typing import TYPE_CHECKING, Any

from persistence._attributes import check_size
from persistence._base import ConditionalStore, decode_record, require_stored_status
from persistence._errors import PersistenceLayerError
from persistence._record import MS_PER_SECOND, IdempotencyRecord, RecordStatus
from persistence._redis_url import client_from_url, parse_url

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

#: How often an acquire asks the server again whether it evicts keys, by the clock the guard passes it: a
#: server switched to an evicting policy while the store is in use is refused from the first acquire this long
#: after the last check (one INFO per primary; records evicted meanwhile run again).
EVICTION_CHECK_MS = 60_000

_FIELDS = ("status", "expires_at", "in_progress_expires_at", "lease", "response", "payload_hash")

# acquire: write the IN_PROGRESS record IF the key is absent, OR expired (expires_at < now_s), OR IN_PROGRESS past
# its lock deadline (in_progress_expires_at < now_ms); ELSE return the record that holds it, in the same round trip.
#   KEYS[1] the record   ARGV[1] now_s   ARGV[2] now_ms   ARGV[3] ms to live   ARGV[4..] field, value, ...
# An absent key (the common case) costs one EXISTS before the write: about a third less server time.
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  local cur = redis.call('HMGET', KEYS[1], 'status', 'expires_at', 'in_progress_expires_at', 'lease', 'response',
                         'payload_hash')
  local expires_at, deadline = tonumber(cur[2]), tonumber(cur[3])
  if (cur[1] ~= 'IN_PROGRESS' and cur[1] ~= 'COMPLETE') or expires_at == nil then return cur end
  local expired = expires_at < tonumber(ARGV[1])
  local lock_expired = cur[1] == 'IN_PROGRESS' and deadline ~= nil and deadline < tonumber(ARGV[2])
  if not (expired or lock_expired) then return cur end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return false
"""

# complete: replace the holder's IN_PROGRESS record by its COMPLETE one IF lease = mine AND status = IN_PROGRESS;
# ELSE return what is there (nothing, someone else's record, or ours already COMPLETE: a retried request).
# The key's time to live becomes what the lock's had left plus the move of expires_at (both by our clock).
#   KEYS[1] the record   ARGV[1] lease   ARGV[2] new expires_at (s)   ARGV[3] margin ms   ARGV[4] longest ttl ms
#   ARGV[5..] field, value, ...
_COMPLETE = """
local cur = redis.call('HMGET', KEYS[1], 'status', 'lease', 'expires_at')
if cur[1] == 'IN_PROGRESS' and cur[2] == ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then left = tonumber(ARGV[3]) end
  local ttl = (tonumber(ARGV[2]) - tonumber(cur[3])) * 1000 + left
  if ttl < 1 then ttl = 1 end
  if ttl > tonumber(ARGV[4]) then ttl = tonumber(ARGV[4]) end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], unpack(ARGV, 5))
  redis.call('PEXPIRE', KEYS[1], ttl)
  return false
end
return redis.call('HMGET', KEYS[1], 'status', 'expires_at', 'in_progress_expires_at', 'lease', 'response',
                  'payload_hash')
"""

# release: delete the record IF status = as read AND lease = as read; ELSE return what is there (nothing counts
# as released; a record committed meanwhile or taken over is left alone).
#   KEYS[1] the record   ARGV[1] lease   ARGV[2] status
_RELEASE = """
local cur = redis.call('HMGET', KEYS[1], 'status', 'expires_at', 'in_progress_expires_at', 'lease', 'response',
                       'payload_hash')
if cur[4] == ARGV[1] and cur[1] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return false
end
return cur
"""

#: Each script's SHA1, the name EVALSHA calls it by.
_SHA1 = {s: hashlib.sha1(s.encode(), usedforsecurity=False).hexdigest() for s in (_ACQUIRE, _COMPLETE, _RELEASE)}


class RedisPersistenceLayer(ConditionalStore):
    """Records in Redis or Valkey, each transition one atomic Lua script (one round trip, fenced by the lease).

    Examples:
        >>> store = RedisPersistenceLayer(url="redis://127.0.0.1:6379/0", key_prefix="orders:")
        >>> store.key_prefix
        'orders:'
    """

    #: Why ``guard.write`` is refused here (its ``TypeError`` says so).
    writes_refused = "no Redis transaction spans the commit's fencing script and the body's writes (docs: exactly-once)"

    def __init__(
        self,
        client: Any = None,
        *,
        url: str | None = None,
        key_prefix: str = "idempotency:",
        expiry_margin_seconds: int = 300,
        allow_eviction: bool = False,
    ) -> None:
        """Configure the store; nothing is sent until the first call.

        Args:
            client: A client you built: redis-py's ``Redis`` or ``RedisCluster``, or anything with their
                interface (valkey-py). Exactly one of ``client`` and ``url``.
            url: ``redis://``, ``rediss://``, ``valkey://`` or ``valkeys://`` URL (add ``?cluster=true`` for a
                cluster, ``?allow_eviction=true`` for ``allow_eviction``); the client is built on first use.
            key_prefix: Where this store's keys live; ``records list`` scans only these.
            expiry_margin_seconds: Added to the time a record has left (by our clock) for the key's Redis
                expiry: the slack for a server that runs fast or a commit long after the lock.
            allow_eviction: Use a server whose ``maxmemory-policy`` may evict keys. Refused by default (asked on
                the first call, then by an acquire ``EVICTION_CHECK_MS`` after the last check): an evicted record
                runs its body again, and an evicted lock lets a duplicate run alongside.

        Raises:
            ValueError: Neither or both of ``client`` and ``url``; a URL this store cannot use; a negative margin;
                an asyncio client.
            TypeError: A margin that is not a whole number of seconds; a prefix that is not text.
            ImportError: A URL without redis-py installed.
        """
        if (client is None) == (url is None):
            raise ValueError("pass exactly one of client= (a redis-py client) and url=")
        from_url = parse_url(url) if url is not None else None  # a bad URL fails here, not at the first record
        if inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
            msg = "the Redis store takes a blocking client (redis.Redis); AsyncBatchProcessor runs it in threads"
            raise ValueError(msg)
        if isinstance(expiry_margin_seconds, bool) or not isinstance(expiry_margin_seconds, int):
            # A float would reach PEXPIRE after HSET: a lock written with no expiry, failing its record.
            msg = f"expiry_margin_seconds must be a whole number of seconds, got {expiry_margin_seconds!r}"
            raise TypeError(msg)
        if expiry_margin_seconds < 0:
            raise ValueError(f"expiry_margin_seconds must not be negative, got {expiry_margin_seconds}")
        if not isinstance(key_prefix, str):
            raise TypeError(f"key_prefix must be text, got {key_prefix!r}")
        self.key_prefix = key_prefix
        self.url = url
        self.expiry_margin_seconds = expiry_margin_seconds
        self.allow_eviction = allow_eviction or (from_url is not None and from_url.allow_eviction)
        self._client = client
        # The client library's exceptions module: redis-py's for a URL, else the client's own (valkey-py's...).
        library = "redis" if client is None else type(client).__module__.partition(".")[0]
        self._exceptions = _exceptions_of(library)
        self._errors = self._errors_named(*_CLIENT_ERRORS)
        self._checked_at_ms: int | None = None  # when an acquire's clock last saw the server pass its check
        self._server_checked = False
        self._building, self._checking = threading.Lock(), threading.Lock()

    @property
    def client(self) -> Any:
        """The redis-py client (built from ``url`` on first use)."""
        if self._client is None:
            with self._building:  # threads making their first call at once share one client
                if self._client is None:
                    self._client = client_from_url(self.url or "")
        return self._client

    def close(self) -> None:
        """Close the connections of the client this store built from ``url``; a client you passed stays yours.

        The next call builds a new client.
        """
        if self.url is not None and self._client is not None:
            client, self._client = self._client, None
            client.close()

    def _run(self, key: str, source: str, args: list[Any], now_ms: int | None = None) -> Any:
        stored, sha = self.key_prefix + key, _SHA1[source]

        def call(client: Any) -> Any:
            try:
                return client.evalsha(sha, 1, stored, *args)
            except self._errors_named("NoScriptError"):
                # A server that does not have it yet (or lost it on a restart): EVAL runs it and keeps it, on the
                # key's own node (redis-py's SCRIPT LOAD would go to every primary, and fail while one is down).
                return client.eval(source, 1, stored, *args)

        return self._command(key, call, now_ms)

    def _acquire(self, record: IdempotencyRecord, now_ms: int) -> IdempotencyRecord | None:
        check_size(record)
        # A record counts until the END of its expires_at second: the key lives one second past it, plus the margin.
        ttl_ms = (record.expires_at + 1 + self.expiry_margin_seconds) * MS_PER_SECOND - now_ms
        args = [now_ms // MS_PER_SECOND, now_ms, min(max(1, ttl_ms), MAX_TTL_MS), *_pairs(record)]
        found = self._run(record.key, _ACQUIRE, args, now_ms)  # an acquire lets a body run: checked again
        return record if found is None else _decode(record.key, found, present=True)

    def _complete(self, record: IdempotencyRecord, writes: Sequence[Any] | None) -> IdempotencyRecord | None:  # noqa: ARG002 - always None: no complete_with here
        check_size(record)
        margin_ms = self.expiry_margin_seconds * MS_PER_SECOND
        fields = _pairs(record, lock_deadline=False)  # a COMPLETE record has no lock deadline
        args = [record.lease, record.expires_at, margin_ms, MAX_TTL_MS, *fields]
        found = self._run(record.key, _COMPLETE, args)
        return record if found is None else _decode(record.key, found)

    def _release(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        found = self._run(record.key, _RELEASE, [record.lease, record.status.value])
        return None if found is None else _decode(record.key, found)

    def get(self, key: str) -> IdempotencyRecord | None:
        """See :meth:`persistence.PersistenceLayer.get`."""
        record: IdempotencyRecord | None = self._command(key, lambda c: self._read(c, key))
        return record

    def _read(self, client: Any, key: str) -> IdempotencyRecord | None:
        found = client.hmget(self.key_prefix + key, _FIELDS)
        # No record field at all: nothing there, or (a second look, rare) a hash another program wrote.
        present = all(v is None for v in found) and bool(client.exists(self.key_prefix + key))
        return _decode(key, found, present=present)

    def delete(self, key: str) -> bool:
        """See :meth:`persistence.PersistenceLayer.delete`."""
        return bool(self._command(key, lambda c: c.delete(self.key_prefix + key)))

    def scan(self, status: RecordStatus | None = None, limit: int | None = None) -> Iterator[IdempotencyRecord]:
        """See :meth:`persistence.PersistenceLayer.scan`. Scans only ``key_prefix``, on every primary of a cluster."""
        require_stored_status(status)
        pattern = _glob_escape(self.key_prefix) + "*"
        keys = self._command(None, lambda c: self._keys(c, pattern))
        records = (self.get(stored[len(self.key_prefix) :]) for stored in keys)  # one at a time, as they are taken
        wanted = (r for r in records if r is not None and (status is None or r.status is status))
        yield from itertools.islice(wanted, limit)

    def _keys(self, client: Any, pattern: str) -> list[str]:
        return sorted(_key_text(k, self.key_prefix) for k in client.scan_iter(match=pattern, count=500))

    def _command(self, key: str | None, call: Callable[[Any], Any], now_ms: int | None = None) -> Any:
        try:
            if self._check_due(now_ms):
                with self._checking:  # threads due at once: one check
                    if self._check_due(now_ms):
                        self._check_server(now_ms)
            return call(self.client)
        except self._errors as e:
            subject = f"on {key!r}" if key is not None else "while scanning its keys"
            raise PersistenceLayerError(f"Redis store failed {subject}: {e}", key=key) from e
        except UnicodeEncodeError as e:  # a key holding a lone surrogate has no UTF-8 form
            raise PersistenceLayerError(f"Redis store cannot encode the text of {key!r}: {e}", key=key) from e
        except UnicodeDecodeError as e:  # a client built with decode_responses=True, reading bytes we did not write
            msg = f"stored item {key!r} is not a record this library wrote: {e}"
            raise PersistenceLayerError(msg, key=key) from e

    def _check_due(self, now_ms: int | None) -> bool:
        """Whether the server is to be asked before this call: on the first call, and then, unless eviction was
        accepted, on an acquire (``now_ms`` given) whose clock is ``EVICTION_CHECK_MS`` past the last check (or
        before it: a clock set back)."""  # noqa: D205, D209 - one sentence
        if not self._server_checked:
            return True
        if now_ms is None or self.allow_eviction:
            return False
        last = self._checked_at_ms
        return last is None or not last <= now_ms < last + EVICTION_CHECK_MS

    def _check_server(self, now_ms: int | None) -> None:
        """Refuse a server that evicts keys, and a cluster node reached as a single server.

        INFO works where CONFIG is blocked (ElastiCache, MemoryDB). A cluster's primaries are asked one by one;
        one that is down is skipped (it holds no record until it is back, and the rest must not wait).
        """
        if hasattr(self.client, "get_primaries"):  # a cluster client (redis-py's or valkey-py's)
            nodes = [n for n in map(self._node_info, self.client.get_primaries()) if n is not None]
        else:
            nodes = [self._info(self.client.info)]
            if nodes[0].get("cluster_enabled"):
                msg = (
                    "the Redis server is a node of a cluster, reached by a client for a single server: add "
                    "?cluster=true to the store URL, or pass a RedisCluster client"
                )
                raise PersistenceLayerError(msg)
        for node in nodes:
            policy = node.get("maxmemory_policy", "noeviction")
            if policy != "noeviction" and int(node.get("maxmemory", 0)) and not self.allow_eviction:
                msg = (
                    f"the Redis server evicts keys (maxmemory-policy {policy}): an evicted record runs its body "
                    "again. Set maxmemory-policy noeviction (an ElastiCache parameter group), or pass "
                    "allow_eviction=True (?allow_eviction=true in a URL) to accept it"
                )
                raise PersistenceLayerError(msg)
        self._server_checked = bool(nodes)
        self._checked_at_ms = now_ms if nodes else None

    def _node_info(self, node: Any) -> dict[str, Any] | None:
        """One cluster primary's INFO, or ``None`` when it cannot be reached now."""
        down: tuple[type[Exception], ...] = (ConnectionError, TimeoutError)
        down += self._errors_named("ConnectionError", "TimeoutError")
        try:
            answer = self._info(lambda: self.client.info(target_nodes=node))
        except down:
            return None
        per_node = [v for v in answer.values() if isinstance(v, dict)]
        return per_node[0] if per_node and "maxmemory_policy" not in answer else answer

    def _info(self, ask: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """INFO's answer, or an error naming the fix when this user may not run INFO (an ACL without it)."""
        try:
            return ask()
        except self._errors_named("NoPermissionError") as e:
            if self.allow_eviction:  # nothing left to check that the user has not already accepted
                return {}
            msg = (
                "the Redis store checks the server's maxmemory-policy with INFO, which this user may not run: "
                "grant it (ACL +info), or pass allow_eviction=True to skip the check"
            )
            raise PersistenceLayerError(msg) from e

    def _errors_named(self, *names: str) -> tuple[type[Exception], ...]:
        """The client library's exceptions of these names (those it lacks are left out)."""
        found = (getattr(self._exceptions, name, None) for name in names)
        return tuple(e for e in found if isinstance(e, type) and issubclass(e, Exception))


#: What the store turns into ``PersistenceLayerError``: each library's base error, and its cluster client's, which
#: does not derive from it.
_CLIENT_ERRORS = ("RedisError", "ValkeyError", "RedisClusterException", "ValkeyClusterException")


def _exceptions_of(library: str) -> Any:
    """``{library}.exceptions``, or ``None`` for another library's client (its errors reach the caller as they are)."""
    try:
        return importlib.import_module(f"{library}.exceptions")
    except ImportError:
        return None


def _key_text(raw: Any, prefix: str) -> str:
    """A key ``scan`` found, as text; one that is not UTF-8 was not written by this library."""
    try:
        return str(_text(raw))
    except UnicodeDecodeError as e:
        key = raw.decode("utf-8", "backslashreplace").removeprefix(prefix)
        raise PersistenceLayerError(f"stored item {key!r} is not a record this library wrote: {e}", key=key) from e


def _pairs(record: IdempotencyRecord, *, lock_deadline: bool = True) -> list[Any]:
    """The record's fields as ``field, value, ...`` for HSET (absent values are not written)."""
    deadline = record.in_progress_expires_at if lock_deadline else None
    values = (record.status.value, record.expires_at, deadline, record.lease, record.response, record.payload_hash)
    return [part for name, value in zip(_FIELDS, values, strict=True) if value is not None for part in (name, value)]


def _text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _decode(key: str, found: list[Any], *, present: bool = False) -> IdempotencyRecord | None:
    """The record an HMGET of every field returned, or ``None`` when the key holds nothing.

    ``present``: the key is known to exist (the acquire script said so), so no field at all is a foreign item.
    """
    try:
        values = [_text(v) for v in found]
    except UnicodeDecodeError as e:
        raise PersistenceLayerError(f"stored item {key!r} is not a record this library wrote: {e}", key=key) from e
    if not present and all(v is None for v in values):
        return None
    return decode_record(key=key, **dict(zip(_FIELDS, values, strict=True)))


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


#: The longest Redis expiry a key is given (about 3,000 years): a larger one overflows the server's clock
#: arithmetic, and PEXPIRE would fail after the record was written.
MAX_TTL_MS = 10**14
