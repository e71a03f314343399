"""Why a body runs without a guard: idempotency switched off (ours or Powertools' variable), or no key selected."""

from __future__ import annotations

import functools
import logging
import os
from typing import TYPE_CHECKING

from consumer._outcomes_log import log_unguarded, request_id

if TYPE_CHECKING:
    from collections.abc import Callable

    from consumer._context import LambdaContext

logger = logging.getLogger("idempotent_consumer")

#: Our variable, and Powertools' name for the same switch (read when ours is unset or empty).
DISABLED_VARIABLE, POWERTOOLS_DISABLED_VARIABLE = "IDEMPOTENCY_DISABLED", "POWERTOOLS_IDEMPOTENCY_DISABLED"
_TRUE = frozenset(("1", "true", "t", "yes", "y", "on"))
_FALSE = frozenset(("", "0", "false", "f", "no", "n", "off"))


def idempotency_disabled() -> bool:
    """Whether every guard is a pass-through (for users' unit tests): the body runs, nothing is locked or stored.

    ``IDEMPOTENCY_DISABLED`` decides when it is set; otherwise ``POWERTOOLS_IDEMPOTENCY_DISABLED`` (Powertools'
    name, an alias) does. Only an explicit true value disables (``1``, ``true``, ``t``, ``yes``, ``y``, ``on``,
    any case). A value that is neither true nor false (``disabled``, ``tru``) keeps idempotency on and logs a
    warning: a typo must not switch off the one protection against double charges. While idempotency is off, a
    warning says so once per process: every delivery of a record runs its body again.
    """
    variable = DISABLED_VARIABLE
    value = os.environ.get(variable, "").strip().lower()
    if not value:
        variable = POWERTOOLS_DISABLED_VARIABLE
        value = os.environ.get(variable, "").strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE:
        _warn_disabled(variable)
        return True
    _warn_unrecognised_disabled(variable, value)
    return False


@functools.lru_cache(maxsize=8)
def _warn_disabled(variable: str) -> None:
    logger.warning(
        "%s is set: idempotency is OFF in this process; every delivery runs its body again and nothing is locked or "
        "stored (meant for unit tests, never for production)",
        variable,
    )


@functools.lru_cache(maxsize=8)
def _warn_unrecognised_disabled(variable: str, value: str) -> None:
    logger.warning(
        "%s=%r is not a true or false value: idempotency stays ON (use 1/true/yes/on to disable)", variable, value
    )


_warned_invocation: list[str | None] = []


def warn_unguarded(context: LambdaContext | None, why: Callable[[], str | None]) -> None:
    """Warn that a record runs unguarded (no key selected): once per invocation (per process without a context).

    ``why`` says what selected nothing, on which record, and the fix when one is known; it is called only when the
    warning is written.
    """
    invocation = request_id(context)  # a test's stand-in context may have none
    if _warned_invocation and _warned_invocation[0] == invocation:
        return
    _warned_invocation[:] = [invocation]
    log_unguarded(context, why())
