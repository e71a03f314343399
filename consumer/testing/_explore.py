"""Exploration: every schedule to a depth (states already seen are cut), then random schedules within a budget."""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    from consumer.testing._run import Outcome, Settings
    from persistence import PersistenceLayer


class SimulationFailure(AssertionError):  # noqa: N818 - an assertion about the store, failed: pytest shows it so
    """An invariant failed in a schedule: carries the shortest failing schedule found and its trace.

    Attributes:
        violations: What failed, one line each.
        schedule: The choices that replay the run: ``simulate(make_store, schedule=failure.schedule)``.
        trace: One line per step: actor, yield point, fault, the actor's clock (relative to the simulated epoch).
        seed: The seed of the random run that found it (``None``: found by the exhaustive search).
    """

    def __init__(self, outcome: Outcome, seed: int | None) -> None:
        """Describe the failing ``outcome``."""
        self.violations, self.schedule, self.seed = outcome.violations, outcome.choices, seed
        self.trace = [str(step) for step in outcome.steps]
        found = "by the exhaustive search" if seed is None else f"by the random run of seed {seed}"
        lines = [f"invariant violated (found {found}; replay: schedule={self.schedule}):"]
        lines += (
            [f"  {v}" for v in self.violations]
            + ["trace:"]
            + [f"  {n:>3} {line}" for n, line in enumerate(self.trace, 1)]
        )
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class SimulationReport:
    """What :func:`simulate` explored (it held in every schedule).

    Attributes:
        exhaustive_runs: Runs of the exhaustive search (each a schedule, or a prefix cut as a state already seen).
        depth: Every choice up to this depth was explored (later choices take the first option).
        longest: The most choices a run made: when it is at most ``depth`` and the search is complete, every
            schedule was explored, whatever its length.
        exhaustive_complete: Whether the exhaustive search finished within the budget.
        exhaustive_seconds: Time the exhaustive search took.
        random_runs: Random schedules run after it.
        seconds: Time taken, in all.
    """

    exhaustive_runs: int
    depth: int
    longest: int
    exhaustive_complete: bool
    exhaustive_seconds: float
    random_runs: int
    seconds: float

    def __str__(self) -> str:
        """One line: the figures."""
        done = "complete" if self.exhaustive_complete else "cut by the budget"
        rate = (self.exhaustive_runs + self.random_runs) / self.seconds if self.seconds else 0.0
        every = " (every schedule)" if self.exhaustive_complete and self.longest <= self.depth else ""
        return (
            f"exhaustive to depth {self.depth}{every}: {self.exhaustive_runs} runs ({done}, "
            f"{self.exhaustive_seconds:.1f} s); "
            f"random: {self.random_runs} runs; {self.seconds:.1f} s ({rate:.0f} runs/s)"
        )


def replay(settings: Settings, make_store: Callable[[], PersistenceLayer], schedule: Sequence[int]) -> Outcome:
    """Run ``schedule`` (choices past its end take the first option)."""
    position = iter(schedule)
    return settings.play(make_store, lambda count, _state: min(next(position, 0), count - 1))


def exhaustive(
    settings: Settings, make_store: Callable[[], PersistenceLayer], depth: int, deadline: float
) -> tuple[int, bool, Outcome | None, int]:
    """Depth-first over every choice up to ``depth``, re-running each schedule from a fresh store.

    A state met before at the same depth or shallower is cut: the run is a function of its state and its
    later choices, so its futures were explored already. Returns (runs, finished, the first failure, the most
    choices any run made).
    """
    prefix: list[tuple[int, int]] = []  # (choice, options) at each branching point of the current run
    seen: dict[Hashable, int] = {}
    runs = longest = 0
    while time.monotonic() < deadline:
        point = 0

        def choose(count: int, state: Callable[[], Hashable]) -> int | None:
            nonlocal point
            here, point = point, point + 1
            if here < len(prefix):
                return prefix[here][0]
            if here >= depth:
                return 0
            key = state()
            if seen.get(key, depth) <= here:
                return None
            seen[key] = here
            prefix.append((0, count))
            return 0

        outcome = settings.play(make_store, choose)
        runs, longest = runs + 1, max(longest, point)
        if outcome.violations:
            return runs, False, outcome, longest
        while prefix and prefix[-1][0] + 1 >= prefix[-1][1]:
            prefix.pop()
        if not prefix:
            return runs, True, None, longest
        choice, count = prefix[-1]
        prefix[-1] = (choice + 1, count)
    return runs, False, None, longest


def shrink(settings: Settings, make_store: Callable[[], PersistenceLayer], outcome: Outcome) -> Outcome:
    """A shorter failing schedule: each choice, from the last, set to the first option while the run still fails."""
    best = outcome
    for index in reversed(range(len(best.choices))):
        if best.choices[index] == 0:
            continue
        candidate = replay(settings, make_store, [*best.choices[:index], 0, *best.choices[index + 1 :]])
        if candidate.violations:
            best = candidate
    return best


def randomly(
    settings: Settings, make_store: Callable[[], PersistenceLayer], seed: int, deadline: float, limit: int | None
) -> tuple[int, Outcome | None, int]:
    """Random schedules until ``deadline`` (at most ``limit``), each run's seed drawn from ``seed``.

    Returns (runs, the first failure, its run's seed).
    """
    seeds = random.Random(seed)  # noqa: S311 - a schedule, not a secret
    runs = 0
    while time.monotonic() < deadline and (limit is None or runs < limit):
        run_seed = seeds.getrandbits(32)
        outcome = settings.play(make_store, functools.partial(_at_random, random.Random(run_seed)))  # noqa: S311
        runs += 1
        if outcome.violations:
            return runs, outcome, run_seed
    return runs, None, 0


def _at_random(rng: random.Random, count: int, _state: Callable[[], Hashable]) -> int:
    return rng.randrange(count)
