"""A stale holder's ``complete`` or ``release`` racing the contenders that take its lapsed lock over.

Every key is first held under a lease whose lock deadline has passed by the contenders' clock. In each round the
contenders sit in small groups, one key per group; behind a barrier, one of the group (the stale holder) commits
or releases under that lease while the others try to take the key over. Whatever the interleaving, each key's
outcome must be that of one serial order of its calls:

- ``complete``: either the stale commit came first (it succeeded, no takeover did, and the record is the stale
  holder's ``COMPLETE``), or a takeover did (exactly one contender won, the commit raised ``LockLostError``
  naming the winner's lock, and the record is that lock). Never both.
- ``release``: exactly one contender takes the key (the lapsed lock, or the key the release freed), the record
  is its lock, and a refused release names that lock. A release that deletes a lock taken over in the meantime
  leaves the key empty, or lets a second contender take it.

Either way, every failed takeover was answered with the record finally stored. A store whose ``complete`` or
``release`` reads the record, checks the lease in Python, then writes without a condition passes every
single-threaded test, and fails here.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pytest

from persistence._errors import LockLostError
from persistence.testing._races import ContractSettings, StoreFactory, in_processes, in_threads, race_processes_of
from persistence.testing._records import NOW_MS, done, lock

if TYPE_CHECKING:
    from persistence._base import PersistenceLayer
    from persistence._record import IdempotencyRecord

#: Which write the stale holder races the takeover with.
Operation = Literal["complete", "release"]

#: The stale holder's lock deadline (from ``NOW_MS``) and the contenders' clock: its lock lapsed a second ago.
STALE_LOCK_MS = 1000
TAKEOVER_NOW_MS = NOW_MS + 2000
STALE_RESPONSE = '"stale"'

#: Contenders per key, round after round: the stale holder and the rest taking its lock over. Small groups give
#: the stale holder a fair chance to act first (in a crowd, a takeover nearly always lands before it), so a
#: window between its check and its write is hit often. In a duel it acts first half of the time; in a group of
#: three, two contenders also race each other for the lapsed lock. Several keys a round keep everyone busy.
GROUP_SIZES = (2, 3)


@dataclass(frozen=True, slots=True)
class Move:
    """What one contender did for one key, and what the store answered.

    Attributes:
        key: The key raced for.
        stale: ``True`` for the stale holder's ``complete``/``release``, ``False`` for a takeover (``acquire``).
        won: The write succeeded: the stale call returned, or the acquire returned ``None``.
        record: The record the contender wrote or tried to: its lock, or the stale holder's ``COMPLETE``.
        seen: The record the store answered with when refusing: the holder a failed acquire returned, or the
            ``existing_record`` of the stale holder's ``LockLostError``.
    """

    key: str
    stale: bool
    won: bool
    record: IdempotencyRecord
    seen: IdempotencyRecord | None = None


def _groups(n: int, contenders: int) -> tuple[int, int]:
    """Return the size of round ``n``'s groups and how many there are (the last one takes the remainder)."""
    size = GROUP_SIZES[n % len(GROUP_SIZES)]
    return size, max(1, contenders // size)


def seat(index: int, n: int, contenders: int) -> tuple[int, bool]:
    """Return the group contender ``index`` races in during round ``n``, and whether it is the stale holder.

    The seats rotate each round, so every contender plays the stale holder and a taker.
    """
    size, groups = _groups(n, contenders)
    place = (index + n) % contenders
    group = min(place // size, groups - 1)
    return group, place == group * size


def plant_stale_locks(
    store: PersistenceLayer, run_id: str, keys: int, contenders: int
) -> list[list[IdempotencyRecord]]:
    """Acquire at least ``keys`` keys at ``NOW_MS`` with a lock lapsing after ``STALE_LOCK_MS``; return the locks.

    Returns one list per round, of its groups' locks: round ``n``'s group ``g`` races for ``{run_id}-{n}-{g}``.
    ``keys`` is rounded up to whole rounds.
    """
    rounds: list[list[IdempotencyRecord]] = []
    while sum(map(len, rounds)) < max(keys, 1):
        n = len(rounds)
        rounds.append([lock(f"{run_id}-{n}-{g}", lock_ms=STALE_LOCK_MS) for g in range(_groups(n, contenders)[1])])
    for held in (held for locks in rounds for held in locks):
        assert store.acquire(held, NOW_MS) is None, f"{held.key!r} was not free before its round"
    return rounds


def _stale_move(store: PersistenceLayer, operation: Operation, stale: IdempotencyRecord) -> Move:
    record = done(stale, STALE_RESPONSE) if operation == "complete" else stale
    try:
        if operation == "complete":
            store.complete(record)
        else:
            store.release(stale)
    except LockLostError as e:
        return Move(stale.key, stale=True, won=False, record=record, seen=e.existing_record)
    return Move(stale.key, stale=True, won=True, record=record)


def contend_with_stale_holders(
    store: PersistenceLayer, barrier: Any, index: int, races: list[tuple[Operation, list[list[IdempotencyRecord]]]]
) -> list[Move]:
    """Play every round of each race behind the barrier, in the seat :func:`seat` gives; return the moves.

    Each race is an operation and the locks :func:`plant_stale_locks` planted for it. In each round, the stale
    holder of a group calls ``complete`` (or ``release``) under its lapsed lease; the others in the group try to
    take the key over at ``TAKEOVER_NOW_MS``.
    """
    moves = []
    try:
        for operation, rounds in races:
            for n, stale_locks in enumerate(rounds):
                barrier.wait(timeout=60)
                group, is_stale = seat(index, n, barrier.parties)
                stale = stale_locks[group]
                if is_stale:
                    moves.append(_stale_move(store, operation, stale))
                    continue
                taker = lock(stale.key, now_ms=TAKEOVER_NOW_MS)
                holder = store.acquire(taker, TAKEOVER_NOW_MS)
                moves.append(Move(stale.key, stale=False, won=holder is None, record=taker, seen=holder))
    except BaseException:
        barrier.abort()  # the other contenders fail fast instead of waiting out the timeout
        raise
    return moves


def _judge(operation: Operation, moves: list[Move], stored: IdempotencyRecord | None) -> list[str]:
    """Return how one key's race departs from every serial order of its calls (empty: it does not)."""
    (stale,) = [m for m in moves if m.stale]
    takers = [m for m in moves if not m.stale]
    winners = [m for m in takers if m.won]
    problems = []
    if operation == "complete" and stale.won:
        if winners:
            problems.append(f"the stale complete succeeded AND {len(winners)} takeover(s) succeeded")
        committed = dataclasses.replace(stale.record, in_progress_expires_at=None)
        if stored != committed:
            problems.append(f"the stale complete succeeded, yet the record stored is {stored!r}")
    elif len(winners) != 1:
        done_or_refused = "succeeded" if stale.won else "was refused"
        problems.append(f"the stale {operation} {done_or_refused} and {len(winners)} takeovers succeeded (not 1)")
    else:
        (winner,) = winners
        if stored != winner.record:
            problems.append(f"the record stored is {stored!r}, not the lock that took the key: {winner.record!r}")
        if not stale.won and stale.seen != winner.record:
            problems.append(f"the stale {operation}'s LockLostError names {stale.seen!r}, not {winner.record!r}")
    blockers = {repr(m.seen) for m in takers if not m.won and m.seen != stored}
    if blockers:
        problems.append(f"failed takeovers were answered with {sorted(blockers)}, not the record stored")
    return problems


def assert_one_serial_order(
    store: PersistenceLayer, operation: Operation, stale_locks: list[IdempotencyRecord], moves: list[Move]
) -> None:
    """Fail unless, for every key, the moves and the stored record match one serial order of its calls."""
    by_key: dict[str, list[Move]] = collections.defaultdict(list)
    for move in moves:
        by_key[move.key].append(move)
    broken = {stale.key: _judge(operation, by_key[stale.key], store.get(stale.key)) for stale in stale_locks}
    shown = [f"{key}: {problem}" for key, problems in broken.items() for problem in problems][:10]
    count = sum(1 for problems in broken.values() if problems)
    assert not count, f"{count} of {len(stale_locks)} {operation} races match no serial order:\n" + "\n".join(shown)


def _race(factory: StoreFactory, contenders: int, keys: int, operations: list[Operation], *, processes: bool) -> None:
    if contenders < 2:  # the stale holder and at least one contender taking its lock over
        pytest.skip("the race needs two contenders: the stale holder and one taking its lock over")
    store = factory()
    where = "processes" if processes else "threads"
    races = [(op, plant_stale_locks(store, f"{where}-stale-{op}", keys, contenders)) for op in operations]
    race = in_processes if processes else in_threads
    reported = race(factory, contenders, contend_with_stale_holders, races)
    moves = [move for moves in reported for move in moves]
    for operation, rounds in races:
        assert_one_serial_order(store, operation, [held for locks in rounds for held in locks], moves)


class TakeoverRaceContract:
    """A stale holder's ``complete``/``release`` raced against takeovers: one serial order, in threads and processes.

    Each test races ``contract_settings.rounds`` keys, a few at a time. The ``contract_settings`` fixture is
    :class:`persistence.testing.RaceContract`'s (both are in ``StoreContract``).
    """

    def test_threads_race_a_stale_complete_against_a_takeover(
        self, store_factory: StoreFactory, contract_settings: ContractSettings
    ) -> None:
        settings = contract_settings
        _race(store_factory, settings.threads, settings.rounds, ["complete"], processes=False)

    def test_threads_race_a_stale_release_against_a_takeover(
        self, store_factory: StoreFactory, contract_settings: ContractSettings
    ) -> None:
        settings = contract_settings
        _race(store_factory, settings.threads, settings.rounds, ["release"], processes=False)

    def test_processes_race_a_stale_complete_and_release_against_a_takeover(
        self, store_factory: StoreFactory, contract_settings: ContractSettings
    ) -> None:
        # One set of worker processes plays both races: starting them is most of the test's time.
        processes = race_processes_of(store_factory, contract_settings)
        _race(store_factory, processes, contract_settings.rounds, ["complete", "release"], processes=True)
