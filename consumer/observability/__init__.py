"""The observability wing: what became of each record, said in structured logs and CloudWatch EMF metrics.

It owns the vocabulary of outcomes (:class:`Outcome`, and :class:`Item`: one record of a batch and what became of
it), the batch processor's log lines (each record that is not plain success, the invocation's summary, an
interrupted batch) and the EMF document (:mod:`consumer.observability.metrics`).

It may import the core (``consumer._reports`` writes every line, the guard's own included, in one format) and
``persistence``. The batch wing imports it, through this module; it imports no other wing (the batch's
``BatchSummary`` it reads is named for type checking only).

The metrics module (:class:`Metrics`, its checks and the EMF document) is imported only where metrics may be on: a
processor built with the ``metrics`` option, or with ``IDEMPOTENCY_METRICS`` set, or the first use of ``Metrics``.
With metrics off (the default) a cold start does not build it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from consumer.observability._outcomes_log import (
    HOOK_FAILED,
    LOCK_LOST,
    NOT_RUN,
    Item,
    Outcome,
    log_interrupted,
    log_item,
    log_summary,
)
from persistence._shadowing import imported_on_first_use

if TYPE_CHECKING:
    from consumer._context import LambdaContext
    from consumer.batch import BatchSummary
    from consumer.observability.metrics import Metrics


def resolve(option: Metrics | bool | None) -> Metrics | None:
    """What a processor's ``metrics`` option means (:func:`consumer.observability.metrics.resolve`).

    Off when ``option`` is ``False``, or ``None`` with ``IDEMPOTENCY_METRICS`` unset or empty, without importing
    the metrics module; any other option or value is for that module to judge (a value that is not clearly true
    keeps metrics off there, with a warning).
    """
    if option is False or (option is None and not os.environ.get("IDEMPOTENCY_METRICS")):
        return None
    from consumer.observability import metrics  # noqa: PLC0415 - metrics may be on: see the module's docstring

    return metrics.resolve(option)


def document(
    metrics: Metrics, summary: BatchSummary, context: LambdaContext | None, timestamp_ms: int
) -> dict[str, Any]:
    """The EMF document of one invocation (:func:`consumer.observability.metrics.document`)."""
    from consumer.observability.metrics import document as emf  # noqa: PLC0415 - imported once metrics are on

    return emf(metrics, summary, context, timestamp_ms)


#: ``Metrics``, from the metrics module, imported on its first use (PEP 562).
__getattr__, __dir__ = imported_on_first_use(globals(), {"Metrics": "consumer.observability.metrics"})


__all__ = [
    "HOOK_FAILED",
    "LOCK_LOST",
    "NOT_RUN",
    "Item",
    "Metrics",
    "Outcome",
    "document",
    "log_interrupted",
    "log_item",
    "log_summary",
    "resolve",
]
