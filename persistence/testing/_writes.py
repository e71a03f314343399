"""The contract of a store that commits the body's writes with the record (:class:`persistence.TransactionalStore`).

A write's shape is the store's own, so the suite reaches it through a :class:`WriteProbe` fixture the store's
tests provide: writes that mark a tag (counted, so a write applied twice shows), a write whose condition fails,
and what was written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pytest

from persistence._errors import LockLostError, WriteConditionError
from persistence._record import RecordStatus
from persistence.testing._records import NOW_MS, acquired, done, lock, stored, taken_over

if TYPE_CHECKING:
    from persistence._base import TransactionalStore


class WriteProbe(Protocol):
    """What :class:`TransactionalContract` needs to write through a store and see what landed."""

    def write(self, tag: str) -> tuple[Any, Any]:
        """A write (``item``, ``params``) that adds one mark of ``tag``: applied twice, it shows twice."""
        ...

    def refused(self) -> tuple[Any, Any] | None:
        """A write whose own condition fails, or ``None`` for a store that refuses none (the test is skipped)."""
        ...

    def written(self) -> list[str]:
        """The tags written so far, one per mark, sorted."""
        ...


def _queued(store: TransactionalStore, key: str, *writes: tuple[Any, Any]) -> list[Any]:
    queue: list[Any] = []
    for item, params in writes:
        store.queue_write(key, queue, item, params)
    return queue


class TransactionalContract:
    """All or nothing: the writes land with the commit, once, and never for a holder that lost its lock.

    Subclass it with a ``store`` fixture (a store implementing :class:`persistence.TransactionalStore`, on empty
    data) and a ``write_probe`` fixture (a :class:`WriteProbe` on the same data).
    """

    def test_the_writes_land_with_the_commit(self, store: Any, write_probe: WriteProbe) -> None:
        held = lock("k")
        assert store.acquire(held, NOW_MS) is None
        writes = _queued(store, "k", write_probe.write("a"), write_probe.write("b"))
        assert write_probe.written() == []  # queued: nothing is sent before the commit
        store.complete_with(done(held, '"ok"'), writes)
        assert write_probe.written() == ["a", "b"]
        assert stored(store, "k").status is RecordStatus.COMPLETE
        assert stored(store, "k").response == '"ok"'

    def test_a_stale_holder_writes_nothing(self, store: Any, write_probe: WriteProbe) -> None:
        stale, new = taken_over(store)
        with pytest.raises(LockLostError) as lost:
            store.complete_with(done(stale), _queued(store, "k", write_probe.write("stale")))
        assert lost.value.existing_record == new
        assert write_probe.written() == []
        assert stored(store, "k") == new

    def test_a_refused_condition_commits_nothing(self, store: Any, write_probe: WriteProbe) -> None:
        refused = write_probe.refused()
        if refused is None:
            pytest.skip("this store refuses no write's condition")
        held = acquired(store, "k")
        with pytest.raises(WriteConditionError) as caught:
            store.complete_with(done(held), _queued(store, "k", write_probe.write("a"), refused))
        assert (caught.value.index, caught.value.key) == (1, "k")
        assert write_probe.written() == []
        assert stored(store, "k") == held  # still the holder's: the guard releases it

    def test_a_retried_commit_applies_once(self, store: Any, write_probe: WriteProbe) -> None:
        held = acquired(store, "k")
        writes = _queued(store, "k", write_probe.write("a"))
        store.complete_with(done(held), writes)
        store.complete_with(done(held), writes)  # its answer was lost: sent again, it finds its own commit
        assert write_probe.written() == ["a"]
        assert stored(store, "k").status is RecordStatus.COMPLETE
