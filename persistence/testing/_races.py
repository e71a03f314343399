"""Contenders racing for the same keys, with real threads and real processes: exactly one winner a round."""

from __future__ import annotations

import collections
import multiprocessing
import pickle
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from persistence._base import PersistenceLayer
from persistence.testing._records import NOW_MS, lock

#: What the contract's ``store_factory`` fixture returns: each call builds a store on the same data.
StoreFactory = Callable[[], PersistenceLayer]


@dataclass(frozen=True, slots=True)
class ContractSettings:
    """How hard the contract's race and state-machine tests push a store.

    Override the ``contract_settings`` fixture to change them, e.g. ``processes=0`` for a store that lives in
    one process (its data is not shared with another), or fewer ``state_machine_examples`` for a slow server.

    Attributes:
        threads: Threads sharing one store object, racing for each round's keys.
        processes: Processes each building a store from ``store_factory`` (which must then be picklable);
            0 skips the process races.
        rounds: Keys raced for in each race test: one after another by every contender (acquire against
            acquire), or a few at a time by small groups (a stale holder's ``complete`` or ``release`` against
            the others taking its lapsed lock over).
        state_machine_examples: Hypothesis examples of the lock state machine; 0 skips it.
        state_machine_steps: Steps per example.
    """

    threads: int = 16
    processes: int = 4
    rounds: int = 100
    state_machine_examples: int = 50
    state_machine_steps: int = 25


#: A contender's work in a race: ``(store, barrier, index, *args)`` -> what it reports. ``index`` is the
#: contender's number, from 0; the barrier lines the contenders up before each round.
Work = Callable[..., Any]


def _contend(store: PersistenceLayer, barrier: Any, _index: int, rounds: int, run_id: str) -> list[int]:
    """Acquire ``{run_id}-{round}`` after every contender reached the barrier; return the rounds won."""
    won = []
    try:
        for n in range(rounds):
            barrier.wait(timeout=60)
            if store.acquire(lock(f"{run_id}-{n}"), NOW_MS) is None:
                won.append(n)
    except BaseException:
        barrier.abort()  # the other contenders fail fast instead of waiting out the timeout
        raise
    return won


def in_threads(factory: StoreFactory, contenders: int, work: Work, *args: Any) -> list[Any]:
    """Run ``work`` in ``contenders`` threads sharing one store object; return what each reported, in order."""
    store = factory()
    barrier = threading.Barrier(contenders)
    with ThreadPoolExecutor(contenders) as pool:
        futures = [pool.submit(work, store, barrier, i, *args) for i in range(contenders)]
        return [f.result(timeout=600) for f in futures]


def _process_main(job: tuple[Work, StoreFactory, tuple[Any, ...]], barrier: Any, index: int, results: Any) -> None:
    work, factory, args = job
    try:
        results.put(work(factory(), barrier, index, *args))
    except BaseException as e:  # reported to the parent, which raises it
        barrier.abort()
        results.put(e)
        raise


def in_processes(factory: StoreFactory, contenders: int, work: Work, *args: Any) -> list[Any]:
    """Run ``work`` in ``contenders`` spawned processes, each building its own store from ``factory``.

    ``work`` must be a module-level function and ``args`` picklable. Returns what each process reported, in
    the order they finished.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(contenders), ctx.Queue()
    job = (work, factory, args)
    procs = [ctx.Process(target=_process_main, args=(job, barrier, i, results)) for i in range(contenders)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes


def race_processes_of(factory: StoreFactory, settings: ContractSettings) -> int:
    """The processes a process race runs; the test is skipped at ``processes=0``, failed for an unpicklable factory."""
    if not settings.processes:
        pytest.skip("contract_settings.processes is 0: the store is not shared across processes")
    try:
        pickle.dumps(factory)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        pytest.fail(f"store_factory must be picklable for the process race, or set processes=0: {e}")
    return settings.processes


def race_threads(factory: StoreFactory, contenders: int, rounds: int, run_id: str) -> list[list[int]]:
    """Race ``contenders`` threads sharing one store object; return the rounds each won."""
    return in_threads(factory, contenders, _contend, rounds, run_id)


def race_processes(factory: StoreFactory, contenders: int, rounds: int, run_id: str) -> list[list[int]]:
    """Race ``contenders`` spawned processes, each building its own store from ``factory``."""
    return in_processes(factory, contenders, _contend, rounds, run_id)


def assert_one_winner_per_round(outcomes: list[list[int]], rounds: int) -> None:
    """Fail unless every round was won by exactly one contender."""
    wins = collections.Counter(n for won in outcomes for n in won)
    assert sorted(wins) == list(range(rounds)), "a round had no winner"
    several = sorted(n for n, count in wins.items() if count > 1)
    assert not several, f"rounds with several winners: {several}"


class RaceContract:
    """Exactly one winner per key when contenders race, in threads and in processes; a lock state machine."""

    @pytest.fixture
    def contract_settings(self) -> ContractSettings:
        """How hard to push the store: override to scale the race and state-machine tests."""
        return ContractSettings()

    def test_threads_race_with_one_winner_per_round(
        self, store_factory: StoreFactory, contract_settings: ContractSettings
    ) -> None:
        settings = contract_settings
        outcomes = race_threads(store_factory, settings.threads, settings.rounds, "threads")
        assert_one_winner_per_round(outcomes, settings.rounds)

    def test_processes_race_with_one_winner_per_round(
        self, store_factory: StoreFactory, contract_settings: ContractSettings
    ) -> None:
        processes = race_processes_of(store_factory, contract_settings)
        outcomes = race_processes(store_factory, processes, contract_settings.rounds, "processes")
        assert_one_winner_per_round(outcomes, contract_settings.rounds)

    def test_lock_state_machine(self, store_factory: StoreFactory, contract_settings: ContractSettings) -> None:
        if not contract_settings.state_machine_examples:
            pytest.skip("contract_settings.state_machine_examples is 0")
        pytest.importorskip("hypothesis", reason="the lock state machine needs Hypothesis")
        from persistence.testing._machine import run_lock_machine  # noqa: PLC0415 - Hypothesis is optional

        run_lock_machine(store_factory(), contract_settings)
