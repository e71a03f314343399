"""Deterministic simulation of the real guard against a real store: every interleaving, to a bound.

``simulate(make_store)`` runs the real :class:`consumer.IdempotencyGuard` (and the CLI's delete path) on
threads that a scheduler lets run one at a time, choosing at every store call who goes next and which fault
the call meets; it checks the invariants after every step and at the end of every run. ``import consumer``
never loads this package. See ``docs/simulation.md``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from consumer.testing._explore import (
    SimulationFailure,
    SimulationReport,
    exhaustive,
    randomly,
    replay,
    shrink,
)
from consumer.testing._run import EPOCH_S, Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from persistence import PersistenceLayer

__all__ = ["SimulationFailure", "SimulationReport", "simulate"]


def simulate(
    make_store: Callable[[], PersistenceLayer],
    *,
    budget_s: float = 60,
    seed: int | None = None,
    holders: int = 2,
    operator: bool = True,
    faults: int = 1,
    redeliveries: int = 2,
    depth: int = 32,
    schedule: Sequence[int] | None = None,
    epoch_s: int = EPOCH_S,
    random_runs: int | None = None,
) -> SimulationReport:
    """Run the real guard against fresh stores under every schedule to ``depth``, then random ones.

    Each run calls ``make_store()`` once for a fresh, empty store. A run is a pure function of its schedule:
    a failure carries the schedule that replays it (pass it back as ``schedule=``).

    Args:
        make_store: Builds a fresh, empty store (a new SQLite file, a flushed Redis database, ...).
        budget_s: Wall-clock budget: the exhaustive search first, random schedules with the rest.
        seed: Seed of the random schedules (``None``: from the time, printed in a failure).
        holders: Deliveries of the one record at the start, racing.
        operator: Whether an operator runs ``records delete`` on the key meanwhile.
        faults: Faults one run may meet: a crash, a lost answer, a failed call, a body that raises, a holder
            whose clock runs a lock's length ahead or behind.
        redeliveries: Deliveries that ended failed, in progress or crashed, redelivered as new holders.
        depth: Choices explored exhaustively; later choices take the first option (the first actor, no fault).
        random_runs: At most this many random schedules after the exhaustive search (``None``: until the budget).
        schedule: Run only this schedule (a failure's ``schedule``), and raise if it fails.
        epoch_s: The simulated time every clock starts from (epoch seconds). The default is far in the past, so
            a store that reads the machine's clock instead of the caller's fails; a store whose records expire by
            the server's clock (Redis's ``PEXPIREAT``) needs one near the real time, fixed for the whole search.

    Returns:
        What was explored, when every run held.

    Raises:
        SimulationFailure: An invariant failed: the shortest failing schedule found, its trace and seed.
    """
    settings = Settings(holders=holders, operator=operator, faults=faults, redeliveries=redeliveries, epoch_s=epoch_s)
    started = time.monotonic()
    if schedule is not None:
        outcome = replay(settings, make_store, schedule)
        if outcome.violations:
            raise SimulationFailure(outcome, seed)
        elapsed = time.monotonic() - started
        return SimulationReport(
            1, 0, len(schedule), exhaustive_complete=False, exhaustive_seconds=elapsed, random_runs=0, seconds=elapsed
        )
    deadline = started + budget_s
    bound = runs = longest = 0
    complete, failure = False, None
    while failure is None and bound < depth and time.monotonic() < deadline:
        bound = min(depth, 2 * bound or 2)  # deepening: a failure is found at the fewest choices made
        runs, complete, failure, longest = exhaustive(settings, make_store, bound, deadline)
        if complete and longest <= bound:
            break  # no run made more choices than this: deeper bounds explore the same schedules
    searched = time.monotonic() - started
    if failure is not None:
        raise SimulationFailure(shrink(settings, make_store, failure), None)
    seed = int(time.time()) if seed is None else seed
    random_count, failure, run_seed = randomly(settings, make_store, seed, deadline, random_runs)
    if failure is not None:
        raise SimulationFailure(shrink(settings, make_store, failure), run_seed)
    return SimulationReport(runs, bound, longest, complete, searched, random_count, time.monotonic() - started)
