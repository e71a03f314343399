"""Builders for records at a fixed point in time, shared by the tests: the ones the shipped contract uses."""

from __future__ import annotations

from persistence.testing import HOUR_S, NOW_MS, NOW_S, done, lock, taken_over

__all__ = ["HOUR_S", "NOW_MS", "NOW_S", "done", "lock", "taken_over"]
