"""The store contract from async code: native async stores, and sync stores reached without blocking the loop.

A sync store's calls either never wait (the in-memory store: a dictionary behind a lock) and are made on the
loop itself, or they wait on a server or a file lock (DynamoDB, SQLite) and run in a bounded thread pool, one
thread per call in flight, so a batch's records reach the store concurrently while the loop runs on.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable, Sequence
    from concurrent.futures import ThreadPoolExecutor

    from persistence._base import PersistenceLayer
    from persistence._record import IdempotencyRecord

T = TypeVar("T")

#: Threads a sync store's calls may use at once when nobody asked for more (a processor asks for its
#: ``max_concurrency``). Threads are started only as calls need them.
DEFAULT_STORE_THREADS = 32


@runtime_checkable
class AsyncPersistenceLayer(Protocol):
    """The life cycle's three conditional writes, awaited: what an async guard needs from a store.

    Each method keeps the meaning of its :class:`~persistence.PersistenceLayer` namesake and returns an
    awaitable. Bring a native async store by implementing them as ``async def``; a sync store is adapted by
    :func:`as_async_store`.
    """

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> Awaitable[IdempotencyRecord | None]:
        """See :meth:`persistence.PersistenceLayer.acquire`."""
        ...

    def complete(self, record: IdempotencyRecord) -> Awaitable[None]:
        """See :meth:`persistence.PersistenceLayer.complete`."""
        ...

    def release(self, record: IdempotencyRecord) -> Awaitable[None]:
        """See :meth:`persistence.PersistenceLayer.release`."""
        ...


class _SyncStoreAdapter:
    """A sync store's calls as awaitables: each call is made by the adapter's ``_run``, on the loop or in a thread."""

    __slots__ = ()
    store: PersistenceLayer

    def _run(self, call: Callable[..., T], *args: Any) -> Awaitable[T]:
        raise NotImplementedError

    def acquire(self, record: IdempotencyRecord, now_ms: int) -> Awaitable[IdempotencyRecord | None]:
        """See :meth:`persistence.PersistenceLayer.acquire`."""
        return self._run(self.store.acquire, record, now_ms)

    def complete(self, record: IdempotencyRecord) -> Awaitable[None]:
        """See :meth:`persistence.PersistenceLayer.complete`."""
        return self._run(self.store.complete, record)

    def release(self, record: IdempotencyRecord) -> Awaitable[None]:
        """See :meth:`persistence.PersistenceLayer.release`."""
        return self._run(self.store.release, record)

    def complete_with(self, record: IdempotencyRecord, writes: Sequence[Any]) -> Awaitable[None]:
        """See :meth:`persistence.TransactionalStore.complete_with` (the store must have it)."""
        return self._run(self.store.complete_with, record, writes)  # type: ignore[attr-defined]  # checked when queued


class InlineStore(_SyncStoreAdapter):
    """A sync store whose calls never wait (``blocking = False``), awaited on the loop itself.

    Attributes:
        store: The sync store; an async guard calls it directly, with no await in between.
    """

    __slots__ = ("store",)

    def __init__(self, store: PersistenceLayer) -> None:
        """Wrap ``store``."""
        self.store = store

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        return call(*args)


class ThreadedStore(_SyncStoreAdapter):
    """A sync store whose calls wait on I/O, run in a bounded thread pool so the event loop never blocks.

    The pool starts threads only as calls need them; ``reserve`` raises the bound (a processor reserves one
    thread per record it runs at once). A call keeps running in its thread when the awaiting task is
    cancelled: the write lands or fails as it would have, whoever still waits for it.

    Attributes:
        store: The sync store.
        max_threads: How many of its calls may run at once.
    """

    def __init__(self, store: PersistenceLayer, max_threads: int = DEFAULT_STORE_THREADS) -> None:
        """Wrap ``store``; no thread starts before the first call."""
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.store = store
        self.max_threads = max_threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def reserve(self, threads: int) -> None:
        """Allow at least ``threads`` calls at once (a larger pool replaces the current one; calls in flight finish)."""
        with self._lock:
            if threads <= self.max_threads:
                return
            old, self._pool, self.max_threads = self._pool, None, threads
        if old is not None:
            old.shutdown(wait=False)

    def _executor(self) -> ThreadPoolExecutor:
        pool = self._pool
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - only async users pay its import

            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.max_threads, thread_name_prefix="idempotent-consumer-store")
                pool = self._pool
        return pool

    def _run(self, call: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        # A future, not a coroutine: awaiting it needs no task of its own.
        import asyncio  # noqa: PLC0415 - already imported by the running loop

        loop = asyncio.get_running_loop()
        while True:
            pool = self._executor()
            try:
                return loop.run_in_executor(pool, call, *args)
            except RuntimeError:  # shut down: a retry only when reserve() replaced the pool meanwhile
                if pool is self._pool:
                    raise


_async_types: dict[type, bool] = {}
_TRANSITIONS = ("acquire", "complete", "release")


def _is_async_type(store_type: type) -> bool:
    known = _async_types.get(store_type)
    if known is None:
        if issubclass(store_type, (InlineStore, ThreadedStore)):  # an adapter of this module: awaited
            _async_types[store_type] = True
            return True
        import inspect  # noqa: PLC0415 - 6 ms at import time; checked once per store type

        kinds = {name: inspect.iscoroutinefunction(getattr(store_type, name, None)) for name in _TRANSITIONS}
        if len(set(kinds.values())) > 1:
            asynchronous = [name for name, is_async in kinds.items() if is_async]
            msg = (
                f"{store_type.__name__} mixes async and plain methods ({', '.join(asynchronous)} async): acquire, "
                "complete and release must all be async def (an async store) or all plain def (a sync store)"
            )
            raise TypeError(msg)
        known = _async_types[store_type] = kinds["acquire"]
    return known


def is_async_store(store: object) -> bool:
    """Whether ``store`` is awaited: an adapter of this module, or a native async store.

    Decided once per store type (the guard asks on every enter and exit): a look-up afterwards.

    Raises:
        TypeError: ``acquire``, ``complete`` and ``release`` are not all ``async def`` or all plain.
    """
    known = _async_types.get(type(store))
    return known if known is not None else _is_async_type(type(store))


_adapters: weakref.WeakKeyDictionary[Any, AsyncPersistenceLayer] = weakref.WeakKeyDictionary()
_unweakable: dict[int, tuple[Any, AsyncPersistenceLayer]] = {}  # keeps the store alive, so its id stays its own
_adapters_lock = threading.Lock()


def as_async_store(
    store: PersistenceLayer | AsyncPersistenceLayer, *, max_threads: int | None = None
) -> AsyncPersistenceLayer:
    """The async face of ``store``, made once per store and shared by every guard and processor using it.

    - a native async store (``async def acquire``) is returned as is;
    - a store that declares ``blocking = False`` (:class:`~persistence.InMemoryPersistenceLayer`) is called on
      the loop (:class:`InlineStore`);
    - any other sync store runs in a :class:`ThreadedStore` pool of ``max_threads`` threads (default
      :data:`DEFAULT_STORE_THREADS`; asking for more later raises the bound).

    The adapter of a sync store reaches it through a weak reference (so a store built per invocation takes its
    thread pool with it): keep the store itself alive for as long as you use the adapter.

    Examples:
        >>> from persistence import InMemoryPersistenceLayer, SQLitePersistenceLayer
        >>> type(as_async_store(InMemoryPersistenceLayer())).__name__
        'InlineStore'
        >>> adapter = as_async_store(SQLitePersistenceLayer("/tmp/as-async-doctest.db"), max_threads=64)
        >>> type(adapter).__name__, adapter.max_threads
        ('ThreadedStore', 64)
    """
    if is_async_store(store):
        return store  # type: ignore[return-value]  # checked just above
    sync: PersistenceLayer = store  # type: ignore[assignment]  # the other member of the union
    if max_threads is None:  # the per-record path: no lock once the adapter exists
        known = _remembered(sync)
        if known is not None:
            return known
    with _adapters_lock:
        adapter = _remembered(sync) or _adapter(sync)
    if max_threads is not None and isinstance(adapter, ThreadedStore):
        adapter.reserve(max_threads)
    return adapter


def _remembered(store: PersistenceLayer) -> AsyncPersistenceLayer | None:
    try:
        return _adapters.get(store)
    except TypeError:  # not weakly referenceable
        return _unweakable.get(id(store), (None, None))[1]


def _adapter(store: PersistenceLayer) -> AsyncPersistenceLayer:
    """Make and remember ``store``'s adapter (the caller holds ``_adapters_lock``).

    The adapter reaches the store through a weak proxy: a strong reference from the value would keep the key of
    ``_adapters`` alive, and a store built for each invocation would leave its adapter and its idle thread pool
    behind for the life of the process. The store's users (guards, processors) hold it strongly.
    """
    try:
        target: PersistenceLayer = weakref.proxy(store)
    except TypeError:  # not weakly referenceable: kept alive with its adapter, so its id stays its own
        adapter = _make(store)
        _unweakable[id(store)] = (store, adapter)
        return adapter
    adapter = _adapters[store] = _make(target)
    return adapter


def _make(store: PersistenceLayer) -> AsyncPersistenceLayer:
    return InlineStore(store) if getattr(store, "blocking", True) is False else ThreadedStore(store)
