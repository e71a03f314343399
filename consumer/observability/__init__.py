"""The observability wing: what became of each record, said in structured logs and CloudWatch EMF metrics.

It owns the vocabulary of outcomes (:class:`Outcome`, and :class:`Item`: one record of a batch and what became of
it), the batch processor's log lines (each record that is not plain success, the invocation's summary, an
interrupted batch) and the EMF document (:mod:`consumer.observability.metrics`).

It may import the core (``consumer._reports`` writes every line, the guard's own included, in one format) and
``persistence``. The batch wing imports it, through this module; it imports no other wing (the batch's
``BatchSummary`` it reads is named for type checking only).
"""

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
from consumer.observability.metrics import Metrics, document, resolve

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
