"""The simulator at a larger bound: two faults per run, and three racing holders (``make reliability``)."""

from __future__ import annotations

from consumer.testing import simulate
from persistence import InMemoryPersistenceLayer


def test_two_faults_per_run_and_three_holders(long_form: bool) -> None:
    budget = 240 if long_form else 4
    two_faults = simulate(InMemoryPersistenceLayer, budget_s=budget, seed=0, faults=2, depth=100, random_runs=0)
    three_holders = simulate(InMemoryPersistenceLayer, budget_s=budget / 2, seed=0, holders=3, depth=100)
    print(f"two faults: {two_faults}\nthree holders: {three_holders}")  # noqa: T201 - the figures, with -s
