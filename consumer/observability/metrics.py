"""CloudWatch metrics from a batch processor, in the Embedded Metric Format (EMF): one JSON line per invocation.

Off by default. Turn it on with the processor's ``metrics`` option (``True``, or a :class:`Metrics`), or with
the environment variable ``IDEMPOTENCY_METRICS=1`` (read when the processor is built; the namespace from
``IDEMPOTENCY_METRICS_NAMESPACE``). In Lambda, a line of EMF JSON written to standard output becomes CloudWatch
metrics with no API call and no extra permission.

Each invocation writes one document: the counts of its summary and its duration, under the dimensions
``FunctionName`` and ``EventSource``::

    {"_aws": {"Timestamp": 1700000000000, "CloudWatchMetrics": [{"Namespace": "IdempotentConsumer",
      "Dimensions": [["FunctionName", "EventSource"]], "Metrics": [{"Name": "Records", "Unit": "Count"}, ...]}]},
     "FunctionName": "orders", "EventSource": "sqs", "Records": 3, "Processed": 1, ..., "BatchDuration": 4.2}

Examples:
    >>> from persistence import InMemoryPersistenceLayer
    >>> from consumer import BatchProcessor, EventType
    >>> processor = BatchProcessor(
    ...     EventType.SQS, store=InMemoryPersistenceLayer(), metrics=Metrics(namespace="Orders", function_name="orders")
    ... )
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from collections.abc import Mapping

    from consumer._context import LambdaContext
    from consumer.batch._summary import BatchSummary

logger = logging.getLogger("idempotent_consumer")

#: The namespace unless told otherwise.
DEFAULT_NAMESPACE = "IdempotentConsumer"
#: The environment variables read when a processor is built without an explicit ``metrics`` option.
ENABLE_VARIABLE, NAMESPACE_VARIABLE = "IDEMPOTENCY_METRICS", "IDEMPOTENCY_METRICS_NAMESPACE"
#: The dimensions of every metric.
DIMENSIONS = ("FunctionName", "EventSource")
#: Metric name -> (the summary field it counts, its CloudWatch unit).
METRICS: dict[str, tuple[str, str]] = {
    "Records": ("records", "Count"),
    "Processed": ("processed", "Count"),
    "Replayed": ("replayed", "Count"),
    "Unguarded": ("unguarded", "Count"),
    "Failed": ("failed", "Count"),
    "LockLost": ("lock_lost", "Count"),
    "InProgress": ("in_progress", "Count"),
    "Skipped": ("skipped", "Count"),
    "Deferred": ("deferred", "Count"),
    "BatchDuration": ("duration_ms", "Milliseconds"),
}
_TRUE = frozenset(("1", "true", "yes", "y", "on"))
_FALSE = frozenset(("", "0", "false", "no", "n", "off"))
# CloudWatch namespaces: 1-255 of these characters, not starting with ":" (its pattern [^:].*), not only spaces
# (at least one non-whitespace character), and never AWS's own ("AWS/...").
_NAMESPACE = re.compile(r"[0-9A-Za-z.\-_/#: ]{1,255}")
# CloudWatch dimension values: 1-1024 ASCII characters, no control characters, not only whitespace.
_DIMENSION_VALUE = re.compile(r"(?=.*[^ ])[\x20-\x7e]{1,1024}")


@dataclass(frozen=True, slots=True)
class Metrics:
    """Where a batch processor's EMF metrics go.

    Attributes:
        namespace: The CloudWatch namespace: 1-255 letters, digits, spaces and ``. - _ / # :``, not starting with
            ``:``, not only spaces, and not ``AWS/...``.
        function_name: The ``FunctionName`` dimension; by default the Lambda context's ``function_name``, else
            ``AWS_LAMBDA_FUNCTION_NAME``, else ``"local"``.
    """

    namespace: str = DEFAULT_NAMESPACE
    function_name: str | None = None

    def __post_init__(self) -> None:
        """Refuse a namespace CloudWatch would refuse, when the processor is built rather than in every log line.

        Raises:
            ValueError: The namespace or the function name is not usable.
        """
        _check_namespace(self.namespace)
        if self.function_name is not None and not _is_dimension_value(self.function_name):
            msg = f"function_name {self.function_name!r}: a dimension value is 1-1024 printable ASCII characters"
            raise ValueError(msg)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Metrics | None:
        """The metrics ``IDEMPOTENCY_METRICS`` asks for (``None``: off), in ``IDEMPOTENCY_METRICS_NAMESPACE``.

        Only a clear true value turns metrics on (``1``, ``true``, ``yes``, ``y``, ``on``, any case); any other
        value that is not clearly false leaves them off, with a warning. A namespace CloudWatch would refuse is
        replaced by the default one, with a warning: metrics are never a reason for a function not to start.
        """
        env = os.environ if environ is None else environ
        value = env.get(ENABLE_VARIABLE, "").strip().lower()
        if value in _FALSE:
            return None
        if value not in _TRUE:
            logger.warning(
                "%s=%r is neither true (1, true, yes, on) nor false (0, false, no, off): metrics stay off",
                ENABLE_VARIABLE,
                value,
            )
            return None
        namespace = env.get(NAMESPACE_VARIABLE) or DEFAULT_NAMESPACE
        try:
            return cls(namespace=namespace)
        except ValueError as e:
            logger.warning("%s: %s; using %r", NAMESPACE_VARIABLE, e, DEFAULT_NAMESPACE)
            return cls()


def _check_namespace(namespace: object) -> None:
    """Refuse a namespace CloudWatch refuses, naming the rule it breaks.

    Raises:
        ValueError: ``namespace`` breaks one of CloudWatch's rules.
    """
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"metrics namespace {namespace!r}: use 1-255 letters, digits, spaces or . - _ / # :")
    if namespace.isspace():
        raise ValueError(
            f"metrics namespace {namespace!r}: CloudWatch needs at least one character that is not a space"
        )
    if namespace.startswith(":"):
        raise ValueError(f"metrics namespace {namespace!r}: CloudWatch refuses a namespace starting with ':'")
    if namespace.startswith("AWS/"):
        raise ValueError(f"metrics namespace {namespace!r}: names starting with AWS/ are AWS's own")


def resolve(option: Metrics | bool | None) -> Metrics | None:
    """What a processor's ``metrics`` option means.

    ``None`` (the default) asks the environment (:meth:`Metrics.from_environment`); ``True`` turns metrics on in
    ``IDEMPOTENCY_METRICS_NAMESPACE`` or the default namespace; ``False`` keeps them off whatever the environment
    says; a :class:`Metrics` is used as it is.

    Raises:
        TypeError: ``option`` is none of these.
    """
    if option is None:
        return Metrics.from_environment()
    if option is True:
        return Metrics.from_environment({**os.environ, ENABLE_VARIABLE: "1"})
    if option is False:
        return None
    if not isinstance(option, Metrics):
        raise TypeError(f"metrics must be a Metrics, True, False or None, got {type(option).__name__}")
    return option


def document(
    metrics: Metrics, summary: BatchSummary, context: LambdaContext | None, timestamp_ms: int
) -> dict[str, Any]:
    """The EMF document of one invocation.

    Args:
        metrics: The configuration.
        summary: What the invocation did.
        context: The Lambda context (its ``function_name`` and ``aws_request_id``).
        timestamp_ms: When, in epoch milliseconds (from the processor's clock).
    """
    directive = {
        "Namespace": metrics.namespace,
        "Dimensions": [list(DIMENSIONS)],
        "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in METRICS.items()],
    }
    doc: dict[str, Any] = {
        "_aws": {"Timestamp": timestamp_ms, "CloudWatchMetrics": [directive]},
        "FunctionName": _function_name(metrics, context),
        "EventSource": summary.event_type,
    }
    for name, (field, _) in METRICS.items():
        doc[name] = getattr(summary, field)
    request_id = getattr(context, "aws_request_id", None)
    if isinstance(request_id, str):
        doc["lambda_request_id"] = request_id  # not a dimension: a link from the metric to the invocation's logs
    return doc


def _function_name(metrics: Metrics, context: LambdaContext | None) -> str:
    if metrics.function_name is not None:
        return metrics.function_name
    # Lambda's own names always fit; a stand-in context or a variable set by hand may not, and CloudWatch would
    # drop the whole document without a word: such a name is not used.
    for found in (getattr(context, "function_name", None), os.environ.get("AWS_LAMBDA_FUNCTION_NAME")):
        if _is_dimension_value(found):
            return found
    return "local"


def _is_dimension_value(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _DIMENSION_VALUE.fullmatch(value) is not None
