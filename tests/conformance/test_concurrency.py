"""Exactly one winner when contenders race for the same key, with real threads and real processes."""

from __future__ import annotations

import collections

import pytest
from race import race_processes, race_threads

ROUNDS = 100


def _assert_one_winner_per_round(outcomes: list[list[int]]) -> None:
    wins = collections.Counter(n for won in outcomes for n in won)
    assert sorted(wins) == list(range(ROUNDS)), "a round had no winner"
    assert set(wins.values()) == {1}, f"rounds with several winners: {[n for n, c in wins.items() if c > 1]}"


def test_sixteen_threads_one_winner_per_round(race_factory):
    _assert_one_winner_per_round(race_threads(race_factory, 16, ROUNDS, "threads"))


@pytest.mark.slow
@pytest.mark.parametrize("race_factory", ["sqlite", "dynamodb"], indirect=True)  # memory lives in one process
def test_four_processes_one_winner_per_round(race_factory):
    _assert_one_winner_per_round(race_processes(race_factory, 4, ROUNDS, "processes"))
